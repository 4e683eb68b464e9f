// The tiled alternative of the suite's attention kernel run on the CPU: experiments/kernels/attention/
// attention.cu is compiled here as host C++ (the CUDA built-ins it uses replaced by the small stand-ins
// below) and its device function attention_tiled runs block by block, each CUDA thread a fiber (ucontext)
// switched at __syncthreads and at __shfl_xor_sync (every lane publishes its value, a switch, every lane
// reads its partner's, a switch). What it checks, for every tiled tile shape of the description's space on
// the description's check shapes and more (causal on and off, sequences that are multiples of no tile),
// against a softmax in double precision:
//   - the results within the description's tolerance (|o - ref| <= 1e-5 + 1e-4 |ref|), every element of O
//     written, nothing outside O written; Q, K, V and O lie between NaN guards and shared memory is
//     poisoned with NaN at every block's start, so a read outside Q, K, V or the written part of shared
//     memory shows up as NaN in O;
//   - every thread reaches the same barriers, and the result does not depend on the order in which the
//     threads run between two switches (forward, reverse, shuffled: bitwise equal);
//   - kernel.yaml's launch (grid, one-dimensional block, dynamic shared memory) for each configuration is
//     what attention_tiled_layout says it needs.
// Limitation: a shuffle is a switch point of the whole block here (a warp-level operation on the GPU), so
// a shared-memory race between warps hidden behind a shuffle would not show; the kernel's only shared
// writes between its barriers (P) are read after the next __syncthreads.
//
// The first part of this file, compiled when it includes itself, wraps attention.cu as a system header so
// that the host compiler passes over the kernel's `#pragma unroll` lines (GCC 12 cannot silence
// -Wunknown-pragmas with a diagnostic pragma in C++).
#ifdef ATTENTION_TILED_TEST_KERNEL
#pragma GCC system_header
#include "../../experiments/kernels/attention/attention.cu"
#else
#include <gtest/gtest.h>
#include <ucontext.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/block_fibers.hpp"
#include "support/test_support.hpp"

// ---- CUDA built-ins for attention.cu on the host -----------------------------------------------------
namespace attention_host {
struct uint3_like {
  unsigned x = 0, y = 0, z = 0;
};
uint3_like threadIdx, blockIdx, gridDim, blockDim;
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
long long misaligned_vector_loads = 0;
inline float4 __ldg(const float4* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) ++misaligned_vector_loads;
  float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline float fmaxf(float a, float b) {
  return std::fmax(a, b);
}
inline float expf(float x) {
  return std::exp(x);
}
inline float exp2f(float x) {
  return std::exp2(x);
}
inline float __int_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}
void __syncthreads();
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
}  // namespace attention_host

#define __global__
#define __device__
#define __forceinline__ inline
#define attention attention_host_entry  // the entry (the row alternative, unused here)
#define ATTENTION_TILED_TEST_KERNEL
namespace attention_host {
#include "attention_tiled_test.cpp"
}  // namespace attention_host
#undef ATTENTION_TILED_TEST_KERNEL
#undef attention
#undef __global__
#undef __device__
#undef __forceinline__

namespace kf {
namespace {

using test::block_fibers;

// Values published by the lanes for the shuffle in progress (one slot per thread of the block).
std::vector<float>& shuffle_slots() {
  static std::vector<float> s(1024);
  return s;
}
long long bad_shuffles = 0;  // partner outside the warp or the block, or a mask other than the full warp

}  // namespace
}  // namespace kf

void attention_host::__syncthreads() {
  kf::test::block_fibers::sync();
}

float attention_host::__shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  const unsigned t = threadIdx.x, partner = t ^ static_cast<unsigned>(lane_mask);
  if (mask != 0xffffffffu || lane_mask < 0 || lane_mask >= 32 || partner >= blockDim.x) ++kf::bad_shuffles;
  auto& slots = kf::shuffle_slots();
  slots[t] = v;
  kf::test::block_fibers::sync();
  const float r = slots[partner < blockDim.x ? partner : t];
  kf::test::block_fibers::sync();
  return r;
}

namespace kf {
namespace {

struct tile_params {
  int bq, bk, tq, tk;
  auto key() const { return std::tie(bq, bk, tq, tk); }
  bool operator<(const tile_params& o) const { return key() < o.key(); }
  std::string text() const {
    return std::to_string(bq) + "x" + std::to_string(bk) + " thread " + std::to_string(tq) + "x" +
           std::to_string(tk);
  }
};

struct launch_args {
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::uint32_t block_threads = 0, shared_bytes = 0;
  int seq = 0, causal = 0;
  float scale = 0.125f;
  const float *Q = nullptr, *K = nullptr, *V = nullptr;
  float* O = nullptr;
  block_fibers::order order = block_fibers::order::forward;
};
using emulator = std::string (*)(const launch_args&, std::mt19937&);

template <int BQ, int BK, int TQ, int TK>
std::string emulate(const launch_args& a, std::mt19937& rng) {
  using L = attention_host::attention_tiled_layout<BQ, BK, TQ, TK>;
  if (a.block_threads != static_cast<std::uint32_t>(L::threads) ||
      a.shared_bytes != static_cast<std::uint32_t>(L::smem_bytes))
    return "launch of " + std::to_string(a.block_threads) + " threads, " + std::to_string(a.shared_bytes) +
           " B shared; the layout needs " + std::to_string(L::threads) + ", " + std::to_string(L::smem_bytes);
  block_fibers fibers(L::threads);
  std::vector<attention_host::float4> smem(static_cast<std::size_t>(L::smem_bytes) / 16);
  attention_host::gridDim = {a.grid[0], a.grid[1], a.grid[2]};
  attention_host::blockDim = {a.block_threads, 1, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::uint32_t by = 0; by < a.grid[1]; ++by)
    for (std::uint32_t bx = 0; bx < a.grid[0]; ++bx) {
      std::fill(smem.begin(), smem.end(), attention_host::float4{nan, nan, nan, nan});
      attention_host::blockIdx = {bx, by, 0};
      // As the entry's tiled group calls it: blocks in reverse order of their queries.
      const std::function<void()> body = [&] {
        attention_host::attention_tiled<BQ, BK, TQ, TK>(
            a.seq, a.causal, a.scale, a.Q, a.K, a.V, a.O, reinterpret_cast<float*>(smem.data()),
            static_cast<int>(a.grid[0] - 1 - bx), static_cast<int>(by));
      };
      const auto e = fibers.run(body, a.order, rng, [](int t) {
        attention_host::threadIdx = {static_cast<unsigned>(t), 0, 0};
      });
      if (!e.empty()) return "block (" + std::to_string(bx) + ", " + std::to_string(by) + "): " + e;
    }
  return "";
}

template <int BQ, int BK, int TQ, int TK>
std::pair<tile_params, emulator> entry() {
  return {{BQ, BK, TQ, TK}, &emulate<BQ, BK, TQ, TK>};
}

// Every tiled tile shape the description could offer (8 or 16 threads per row); the test checks that the
// space's are among them.
const std::map<tile_params, emulator>& emulators() {
  static const std::map<tile_params, emulator> table{
      entry<64, 32, 4, 4>(),  entry<64, 64, 4, 4>(),  entry<64, 64, 4, 8>(),  entry<64, 32, 8, 4>(),
      entry<64, 64, 8, 4>(),  entry<64, 64, 8, 8>(),  entry<128, 32, 4, 4>(), entry<128, 64, 4, 4>(),
      entry<128, 64, 4, 8>(), entry<128, 32, 8, 4>(), entry<128, 64, 8, 4>(), entry<128, 64, 8, 8>(),
  };
  return table;
}

const kernel_spec& attention_spec() {
  static const kernel_spec k = test::load_suite_kernel("attention");
  return k;
}

using test::int_param;

std::map<tile_params, config> tiled_configs() {
  const auto& k = attention_spec();
  std::map<tile_params, config> out;
  const auto impl = *k.space.param_index("impl");
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (k.space.value_of(c, impl).str() != "tiled") continue;
    out.emplace(tile_params{int_param(k, c, "tiled_bq"), int_param(k, c, "tiled_bk"),
                            int_param(k, c, "tiled_tq"), int_param(k, c, "tiled_tk")},
                c);
  }
  return out;
}

// n floats between NaN guards of 64 floats (16-byte aligned data).
struct guarded {
  static constexpr std::size_t pad = 64;
  std::vector<float> v;
  std::size_t size;
  guarded(std::size_t n, float guard) : v(n + 2 * pad, guard), size(n) {}
  float* data() { return v.data() + pad; }
  bool guards_hold(float guard) const {
    for (std::size_t i = 0; i < pad; ++i)
      if (std::bit_cast<std::uint32_t>(v[i]) != std::bit_cast<std::uint32_t>(guard) ||
          std::bit_cast<std::uint32_t>(v[pad + size + i]) != std::bit_cast<std::uint32_t>(guard))
        return false;
    return true;
  }
};

struct problem {
  int bh, seq, causal;
};

std::string check(const tile_params& t, const config& c, const problem& p, std::mt19937& rng,
                  std::initializer_list<block_fibers::order> orders) {
  const auto& k = attention_spec();
  const auto em = emulators().find(t);
  if (em == emulators().end()) return "not emulated";
  const shape s{{"bh", value(p.bh)}, {"seq", value(p.seq)}, {"causal", value(p.causal)}};
  const launch_plan plan = resolve_launch(k, c, s);
  if (plan.block[1] != 1 || plan.block[2] != 1) return "not a one-dimensional block";

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float sentinel = std::bit_cast<float>(0x7fc0beefu);
  const std::size_t n = static_cast<std::size_t>(p.bh) * p.seq * 64;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  guarded q(n, nan), kk(n, nan), v(n, nan);
  for (auto* b : {&q, &kk, &v})
    for (std::size_t i = 0; i < n; ++i)
      b->data()[i] = normal(rng);
  const double scale = 0.125;
  std::vector<double> ref(n, 0.0);
  for (int b = 0; b < p.bh; ++b)
    for (int i = 0; i < p.seq; ++i) {
      const std::size_t base = static_cast<std::size_t>(b) * p.seq * 64;
      const int end = p.causal ? i + 1 : p.seq;
      std::vector<double> sc(static_cast<std::size_t>(end));
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < end; ++j) {
        double d = 0.0;
        for (int c2 = 0; c2 < 64; ++c2)
          d += static_cast<double>(q.data()[base + static_cast<std::size_t>(i) * 64 + c2]) *
               kk.data()[base + static_cast<std::size_t>(j) * 64 + c2];
        sc[static_cast<std::size_t>(j)] = d * scale;
        mx = std::max(mx, d * scale);
      }
      double sum = 0.0;
      for (auto& x : sc)
        sum += (x = std::exp(x - mx));
      for (int j = 0; j < end; ++j)
        for (int c2 = 0; c2 < 64; ++c2)
          ref[base + static_cast<std::size_t>(i) * 64 + c2] +=
              sc[static_cast<std::size_t>(j)] / sum * v.data()[base + static_cast<std::size_t>(j) * 64 + c2];
    }

  std::vector<float> first;
  for (const auto o : orders) {
    guarded out(n, sentinel);
    std::fill(out.data(), out.data() + n, nan);
    launch_args la;
    la.grid = plan.grid;
    la.block_threads = plan.block[0];
    la.shared_bytes = plan.shared_bytes;
    la.seq = p.seq, la.causal = p.causal;
    la.Q = q.data(), la.K = kk.data(), la.V = v.data(), la.O = out.data();
    la.order = o;
    attention_host::misaligned_vector_loads = 0;
    bad_shuffles = 0;
    const auto e = em->second(la, rng);
    if (!e.empty()) return e;
    if (attention_host::misaligned_vector_loads != 0) return "unaligned 128-bit loads";
    if (bad_shuffles != 0) return std::to_string(bad_shuffles) + " bad shuffles";
    if (!out.guards_hold(sentinel)) return "wrote outside O";
    for (std::size_t i = 0; i < n; ++i) {
      const double x = out.data()[i];
      if (!(std::fabs(x - ref[i]) <= 1e-5 + 1e-4 * std::fabs(ref[i])))
        return "O[" + std::to_string(i) + "] = " + std::to_string(x) + ", expected " + std::to_string(ref[i]);
    }
    std::vector<float> got(out.data(), out.data() + n);
    if (first.empty())
      first = got;
    else if (std::memcmp(first.data(), got.data(), n * sizeof(float)) != 0)
      return "the result depends on the order of the threads";
  }
  return "";
}

TEST(attention_tiled, the_space_has_the_tiled_alternative_and_pins_the_other_parameters) {
  const auto configs = tiled_configs();
  EXPECT_GE(configs.size(), 8u);
  for (const auto& [t, c] : configs) {
    EXPECT_TRUE(emulators().count(t)) << t.text();
    const auto& k = attention_spec();
    EXPECT_EQ(int_param(k, c, "block_size"), 64);
    EXPECT_EQ(int_param(k, c, "use_shared"), 0);
  }
}

TEST(attention_tiled, every_tile_shape_matches_the_double_softmax) {
  std::mt19937 rng(7);
  const problem problems[] = {{3, 77, 0}, {2, 130, 1}, {5, 33, 1}, {1, 1, 0},   {1, 1, 1},  {2, 130, 0},
                              {1, 77, 1}, {1, 200, 1}, {1, 64, 1}, {1, 128, 0}, {1, 257, 1}};
  for (const auto& [t, c] : tiled_configs())
    for (const auto& p : problems) {
      const auto e = check(t, c, p, rng, {block_fibers::order::forward});
      EXPECT_EQ(e, "") << t.text() << " bh " << p.bh << " seq " << p.seq << " causal " << p.causal;
    }
}

TEST(attention_tiled, results_do_not_depend_on_the_thread_order) {
  std::mt19937 rng(11);
  for (const auto& [t, c] : tiled_configs()) {
    const auto e =
        check(t, c, {1, 150, 1}, rng,
              {block_fibers::order::forward, block_fibers::order::reverse, block_fibers::order::shuffled});
    EXPECT_EQ(e, "") << t.text();
  }
}

}  // namespace
}  // namespace kf
#endif
