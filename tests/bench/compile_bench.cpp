// Benchmarks of the compile pipeline: NVRTC compile time of a small and a medium kernel (with the
// static-metric extraction), a cache hit, and compile_pool throughput with 1 and 2 threads.
// Run: build/kforge_bench --benchmark_filter=compile
//
// Every timed compilation is cold: each request adds a tiny kernel that stores a per-request salt, so
// its PTX differs from every earlier one. Where a CUDA driver is installed, NVRTC 13.0 keeps its own
// cache of PTX -> SASS results (measured on the H200 host: an identical program recompiled in 11 ms
// instead of 460 ms, also across processes and with unused -D options; CUDA_CACHE_DISABLE=1 turns it
// off). Unsalted requests would time that cache, not the compiler.
#include <benchmark/benchmark.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <random>
#include <string>

#include "kforge/evaluators/compile.hpp"

namespace {

using namespace kf;

constexpr const char* small_src = R"(
extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// A register-blocked SGEMM-like template: 8x8 micro-tiles in registers, tiles staged in shared memory.
constexpr const char* medium_src = R"(
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  constexpr int threads = (BM / TM) * (BN / TN);
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  float a[TM], b[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += threads) {
      const int r = i / BK, c = i % BK;
      As[c][r] = A[(row0 + r) * K + k0 + c];
    }
    for (int i = threadIdx.x; i < BK * BN; i += threads) {
      const int r = i / BN, c = i % BN;
      Bs[r][c] = B[(k0 + r) * N + col0 + c];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) C[(row0 + ty * TM + i) * N + col0 + tx * TN + j] = acc[i][j];
}
)";

/// A value no earlier run of this benchmark used (NVRTC's cache outlives the process).
long next_salt() {
  static std::atomic<long> salt{static_cast<long>(std::random_device{}() & 0x3fffffff) * 1024};
  return salt++;
}

std::string salted(const char* source) {
  return std::string(source) +
         "extern \"C\" __global__ void bench_salt(int* x) { x[0] = " + std::to_string(next_salt()) + "; }\n";
}

compile_request small_request() {
  compile_request r;
  r.source = salted(small_src);
  r.name = "saxpy.cu";
  r.name_expressions = {"saxpy"};
  return r;
}

compile_request medium_request() {
  compile_request r;
  r.source = salted(medium_src);
  r.name = "sgemm.cu";
  r.name_expressions = {"sgemm<128, 128, 8, 8, 8>"};
  return r;
}

/// A private cache directory, removed at exit.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("kforge-compile-bench-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void report_kernel(benchmark::State& state, const compile_result& r) {
  if (!r.ok || r.kernels.empty()) {
    state.SkipWithError("compilation failed");
    return;
  }
  state.counters["registers"] = r.kernels[0].metrics.registers;
  state.counters["cubin_bytes"] = static_cast<double>(r.cubin.size());
}

void BM_compile_small(benchmark::State& state) {
  compiler c;  // no cache
  compile_result r;
  for (auto _ : state) {
    r = c.compile(small_request());
    benchmark::DoNotOptimize(r.cubin.data());
  }
  report_kernel(state, r);
}
BENCHMARK(BM_compile_small)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_compile_medium(benchmark::State& state) {
  compiler c;
  compile_result r;
  for (auto _ : state) {
    r = c.compile(medium_request());
    benchmark::DoNotOptimize(r.cubin.data());
  }
  report_kernel(state, r);
}
BENCHMARK(BM_compile_medium)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

void BM_compile_cache_hit(benchmark::State& state) {
  scratch_dir dir;
  compiler c(dir.path);
  const auto req = medium_request();  // compiled once, then every lookup hits kforge's disk cache
  if (!c.compile(req).ok) {
    state.SkipWithError("compilation failed");
    return;
  }
  compile_result r;
  for (auto _ : state) {
    r = c.compile(req);
    benchmark::DoNotOptimize(r.cubin.data());
  }
  if (!r.cache_hit) state.SkipWithError("expected a cache hit");
  state.counters["cubin_bytes"] = static_cast<double>(r.cubin.size());
}
BENCHMARK(BM_compile_cache_hit)->Unit(benchmark::kMicrosecond);

// Throughput: 16 distinct small compilations through a pool of state.range(0) threads.
void BM_compile_pool(benchmark::State& state) {
  const auto threads = static_cast<std::size_t>(state.range(0));
  constexpr int batch = 16;
  compiler c;
  for (auto _ : state) {
    compile_pool pool(c, threads, 2 * threads);
    std::deque<compile_pool::ticket> outstanding;
    for (int i = 0; i < batch; ++i) {
      if (outstanding.size() == 2 * threads) {  // full: take the oldest before submitting again
        if (!pool.take(outstanding.front()).ok) state.SkipWithError("compilation failed");
        outstanding.pop_front();
      }
      outstanding.push_back(pool.submit(small_request()));
    }
    for (auto t : outstanding)
      if (!pool.take(t).ok) state.SkipWithError("compilation failed");
  }
  state.counters["compiles_per_s"] = benchmark::Counter(
      static_cast<double>(batch) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_compile_pool)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace
