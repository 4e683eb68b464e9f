// The tiled alternative of the suite's SGEMM run on the CPU: experiments/kernels/sgemm/sgemm.cu is compiled
// here as host C++ (the CUDA built-ins it uses replaced by the small stand-ins below) and its device
// function sgemm_tiled runs block by block, each CUDA thread a fiber (ucontext) switched at __syncthreads.
// What it checks, for every tiled configuration of the description and shapes with edges in M, N and K
// (the description's check shapes and more), against a product in double precision:
//   - the results (|c - ref| <= 2e-3 + 1e-4 |ref|), every element of C written, nothing outside C written;
//     A and B lie between NaN guards, and shared memory is poisoned with NaN at every block's start, so
//     a read outside A, B or the written part of shared memory shows up as NaN in C;
//   - every thread reaches the same barriers (no divergent __syncthreads), and the result does not depend
//     on the order in which the threads run between two barriers (forward, reverse, shuffled: bitwise
//     equal), so no thread reads shared memory that another thread writes in the same barrier interval;
//   - the 128-bit global loads happen at 16-byte aligned addresses, and unaligned base pointers (not
//     produced by the runner, but part of the kernel's contract) take the element-wise path;
//   - kernel.yaml's launch (grid, one-dimensional block, dynamic shared memory) for each configuration is
//     what sgemm_tiled_layout says it needs, and the emulated configurations are exactly the space's.
// The fibers run on one OS thread in a fixed order: the test is deterministic.
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
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/block_fibers.hpp"
#include "support/test_support.hpp"

// ---- CUDA built-ins for sgemm.cu on the host -----------------------------------------------------------
namespace sgemm_host {
struct uint3_like {
  unsigned x = 0, y = 0, z = 0;
};
// Set by the fiber scheduler before it resumes a thread.
uint3_like threadIdx, blockIdx, gridDim, blockDim;
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
// 128-bit global loads: counted, and their alignment checked.
long long misaligned_vector_loads = 0;
inline float __ldg(const float* p) {
  return *p;
}
inline float4 __ldg(const float4* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) ++misaligned_vector_loads;
  float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline int min(int a, int b) {
  return a < b ? a : b;
}
void __syncthreads();
}  // namespace sgemm_host

#define __global__
#define __device__
#define __forceinline__ inline
#define sgemm sgemm_host_entry  // the entry (the simple alternative, unused here): no C symbol `sgemm`
namespace sgemm_host {
#include "sgemm_tiled_host.hpp"
}  // namespace sgemm_host
#undef sgemm
#undef __global__
#undef __device__
#undef __forceinline__

namespace kf {
namespace {

using test::block_fibers;

}  // namespace
}  // namespace kf

void sgemm_host::__syncthreads() {
  kf::test::block_fibers::sync();
}

namespace kf {
namespace {

struct tile_params {
  int bm, bn, bk, tm, tn, group;
  auto key() const { return std::tie(bm, bn, bk, tm, tn, group); }
  bool operator<(const tile_params& o) const { return key() < o.key(); }
  bool operator==(const tile_params& o) const { return key() == o.key(); }
  std::string text() const {
    return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " thread " +
           std::to_string(tm) + "x" + std::to_string(tn) + " group " + std::to_string(group);
  }
};

// One launch of the tiled kernel on the host: the grid of `plan`, blocks in launch order.
struct launch_args {
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::uint32_t block_threads = 0, shared_bytes = 0;
  int M = 0, N = 0, K = 0;
  const float* A = nullptr;
  const float* B = nullptr;
  float* C = nullptr;
  block_fibers::order order = block_fibers::order::forward;
};
struct layout_facts {
  int threads = 0, smem_bytes = 0;
};
using emulator = std::string (*)(const launch_args&, std::mt19937&);

template <int BM, int BN, int BK, int TM, int TN, int GROUP>
std::string emulate(const launch_args& a, std::mt19937& rng) {
  using L = sgemm_host::sgemm_tiled_layout<BM, BN, BK, TM, TN>;
  if (a.block_threads != static_cast<std::uint32_t>(L::threads) ||
      a.shared_bytes != static_cast<std::uint32_t>(L::smem_bytes))
    return "launch of " + std::to_string(a.block_threads) + " threads, " + std::to_string(a.shared_bytes) +
           " B shared; the layout needs " + std::to_string(L::threads) + ", " + std::to_string(L::smem_bytes);
  block_fibers fibers(L::threads);
  std::vector<sgemm_host::float4> smem(static_cast<std::size_t>(L::smem_bytes) / 16);
  sgemm_host::gridDim = {a.grid[0], a.grid[1], a.grid[2]};
  sgemm_host::blockDim = {a.block_threads, 1, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::function<void()> body = [&] {
    sgemm_host::sgemm_tiled<BM, BN, BK, TM, TN, GROUP>(a.M, a.N, a.K, a.A, a.B, a.C,
                                                       reinterpret_cast<float*>(smem.data()));
  };
  for (std::uint32_t by = 0; by < a.grid[1]; ++by)
    for (std::uint32_t bx = 0; bx < a.grid[0]; ++bx) {
      std::fill(smem.begin(), smem.end(), sgemm_host::float4{nan, nan, nan, nan});
      sgemm_host::blockIdx = {bx, by, 0};
      const auto e = fibers.run(body, a.order, rng, [](int t) {
        sgemm_host::threadIdx = {static_cast<unsigned>(t), 0, 0};
      });
      if (!e.empty()) return "block (" + std::to_string(bx) + ", " + std::to_string(by) + "): " + e;
    }
  return "";
}

template <int BM, int BN, int BK, int TM, int TN, int GROUP>
std::pair<tile_params, std::pair<emulator, layout_facts>> entry() {
  using L = sgemm_host::sgemm_tiled_layout<BM, BN, BK, TM, TN>;
  // 16-byte alignment of every float4 the kernel reads or writes in shared memory follows from these.
  static_assert(L::lda % 4 == 0 && L::ldb % 4 == 0 && L::a_slot % 4 == 0 && L::slot % 4 == 0);
  static_assert(L::group_step_m % 4 == 0 && L::group_step_n % 4 == 0);
  return {{BM, BN, BK, TM, TN, GROUP}, {&emulate<BM, BN, BK, TM, TN, GROUP>, {L::threads, L::smem_bytes}}};
}

// Every tiled shape of kernel.yaml's space, each at both rasterisation groups (the space's; the test
// `emulated_configurations_are_the_spaces` keeps the two lists equal).
#define SGEMM_TILED_SHAPE(bm, bn, bk, tm, tn) entry<bm, bn, bk, tm, tn, 1>(), entry<bm, bn, bk, tm, tn, 8>()
const std::map<tile_params, std::pair<emulator, layout_facts>>& emulators() {
  static const std::map<tile_params, std::pair<emulator, layout_facts>> table{
      SGEMM_TILED_SHAPE(64, 64, 8, 4, 8),    SGEMM_TILED_SHAPE(64, 64, 8, 8, 4),
      SGEMM_TILED_SHAPE(64, 64, 8, 8, 8),    SGEMM_TILED_SHAPE(64, 64, 16, 4, 4),
      SGEMM_TILED_SHAPE(64, 64, 16, 4, 8),   SGEMM_TILED_SHAPE(64, 64, 16, 8, 4),
      SGEMM_TILED_SHAPE(64, 64, 16, 8, 8),   SGEMM_TILED_SHAPE(64, 128, 8, 8, 8),
      SGEMM_TILED_SHAPE(64, 128, 16, 4, 8),  SGEMM_TILED_SHAPE(64, 128, 16, 8, 4),
      SGEMM_TILED_SHAPE(64, 128, 16, 8, 8),  SGEMM_TILED_SHAPE(64, 256, 16, 8, 8),
      SGEMM_TILED_SHAPE(128, 64, 8, 8, 8),   SGEMM_TILED_SHAPE(128, 64, 16, 4, 8),
      SGEMM_TILED_SHAPE(128, 64, 16, 8, 4),  SGEMM_TILED_SHAPE(128, 64, 16, 8, 8),
      SGEMM_TILED_SHAPE(128, 128, 8, 8, 8),  SGEMM_TILED_SHAPE(128, 128, 16, 4, 8),
      SGEMM_TILED_SHAPE(128, 128, 16, 8, 4), SGEMM_TILED_SHAPE(128, 128, 16, 8, 8),
      SGEMM_TILED_SHAPE(256, 64, 16, 8, 8),
  };
  return table;
}
#undef SGEMM_TILED_SHAPE

const kernel_spec& sgemm_spec() {
  static const kernel_spec k = test::load_suite_kernel("sgemm");
  return k;
}

using test::int_param;

// The space's tiled configurations, by tile parameters (launch_bounds and the pinned parameters aside).
std::map<tile_params, config> tiled_configs() {
  const auto& k = sgemm_spec();
  std::map<tile_params, config> out;
  const auto impl = *k.space.param_index("impl");
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (k.space.value_of(c, impl).str() != "tiled") continue;
    out.emplace(
        tile_params{int_param(k, c, "tiled_bm"), int_param(k, c, "tiled_bn"), int_param(k, c, "tiled_bk"),
                    int_param(k, c, "tiled_tm"), int_param(k, c, "tiled_tn"), int_param(k, c, "tiled_group")},
        c);
  }
  return out;
}

// Row-major matrices between NaN guards; `misalign` shifts the data by one float from 16-byte alignment.
struct guarded {
  static constexpr std::size_t guard = 64;  // floats on each side
  std::vector<float> storage;
  std::size_t offset = 0, size = 0;
  guarded(std::size_t n, bool misalign, float fill_guard) : storage(n + 2 * guard + 8, fill_guard), size(n) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage.data());
    offset = guard + (16 - base % 16) % 16 / sizeof(float) + (misalign ? 1 : 0);
  }
  float* data() { return storage.data() + offset; }
  bool guards_hold(float fill_guard) const {
    const auto same = [&](float x) { return std::memcmp(&x, &fill_guard, sizeof x) == 0; };
    for (std::size_t i = 0; i < offset; ++i)
      if (!same(storage[i])) return false;
    for (std::size_t i = offset + size; i < storage.size(); ++i)
      if (!same(storage[i])) return false;
    return true;
  }
};

struct problem {
  int M, N, K;
};

// Runs configuration `t` on `p` in each order; empty when every check passes, else what failed.
std::string check(const tile_params& t, const problem& p, bool misalign, std::mt19937& rng,
                  std::initializer_list<block_fibers::order> orders) {
  const auto& k = sgemm_spec();
  const auto configs = tiled_configs();
  const auto c = configs.find(t);
  if (c == configs.end()) return "not a configuration of the space";
  const auto em = emulators().find(t);
  if (em == emulators().end()) return "not emulated";
  // The launch from kernel.yaml (K = 0 has empty buffers, which the runner refuses; the geometry does not
  // depend on K).
  const shape s{{"M", value(p.M)}, {"N", value(p.N)}, {"K", value(std::max(p.K, 1))}};
  const launch_plan plan = resolve_launch(k, c->second, s);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float sentinel = std::bit_cast<float>(0x7fc0beefu);  // a NaN with a payload of its own
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  guarded a(static_cast<std::size_t>(p.M) * p.K, misalign, nan),
      b(static_cast<std::size_t>(p.K) * p.N, misalign, nan);
  for (std::size_t i = 0; i < a.size; ++i)
    a.data()[i] = u(rng);
  for (std::size_t i = 0; i < b.size; ++i)
    b.data()[i] = u(rng);
  std::vector<double> ref(static_cast<std::size_t>(p.M) * p.N, 0.0);
  for (int m = 0; m < p.M; ++m)
    for (int kk = 0; kk < p.K; ++kk) {
      const double x = a.data()[static_cast<std::size_t>(m) * p.K + kk];
      for (int n = 0; n < p.N; ++n)
        ref[static_cast<std::size_t>(m) * p.N + n] += x * b.data()[static_cast<std::size_t>(kk) * p.N + n];
    }

  std::vector<float> first;
  for (const auto o : orders) {
    guarded out(static_cast<std::size_t>(p.M) * p.N, misalign, sentinel);
    std::fill(out.data(), out.data() + out.size, nan);  // unwritten elements stay NaN
    launch_args la;
    la.grid = plan.grid;
    la.block_threads = plan.block[0] * plan.block[1] * plan.block[2];
    if (plan.block[1] != 1 || plan.block[2] != 1) return "not a one-dimensional block";
    la.shared_bytes = plan.shared_bytes;
    la.M = p.M, la.N = p.N, la.K = p.K;
    la.A = a.data(), la.B = b.data(), la.C = out.data();
    la.order = o;
    sgemm_host::misaligned_vector_loads = 0;
    const auto e = em->second.first(la, rng);
    if (!e.empty()) return e;
    if (sgemm_host::misaligned_vector_loads != 0)
      return std::to_string(sgemm_host::misaligned_vector_loads) + " 128-bit loads at unaligned addresses";
    if (!out.guards_hold(sentinel)) return "wrote outside C";
    for (std::size_t i = 0; i < out.size; ++i) {
      const double r = ref[i], v = out.data()[i];
      if (!(std::abs(v - r) <= 2e-3 + 1e-4 * std::abs(r)))
        return "C[" + std::to_string(i / p.N) + "][" + std::to_string(i % p.N) + "] = " + std::to_string(v) +
               ", expected " + std::to_string(r);
    }
    std::vector<float> got(out.data(), out.data() + out.size);
    if (first.empty())
      first = got;
    else if (std::memcmp(first.data(), got.data(), got.size() * sizeof(float)) != 0)
      return "the result depends on the order of the threads between barriers (a shared-memory race)";
  }
  return "";
}

TEST(sgemm_tiled_emulation, emulated_configurations_are_the_spaces_and_launch_as_the_layout_needs) {
  const auto& k = sgemm_spec();
  std::set<tile_params> space, emulated;
  for (const auto& [t, c] : tiled_configs()) {
    space.insert(t);
    const auto em = emulators().find(t);
    if (em == emulators().end()) continue;
    const shape s{{"M", value(4096)}, {"N", value(4096)}, {"K", value(4096)}};
    const auto plan = resolve_launch(k, c, s);
    EXPECT_EQ(plan.block[0], static_cast<std::uint32_t>(em->second.second.threads)) << t.text();
    EXPECT_EQ(plan.shared_bytes, static_cast<std::uint32_t>(em->second.second.smem_bytes)) << t.text();
    EXPECT_EQ(plan.grid[0], static_cast<std::uint32_t>(4096 / t.bn)) << t.text();
    EXPECT_EQ(plan.grid[1], static_cast<std::uint32_t>(4096 / t.bm)) << t.text();
  }
  for (const auto& [t, e] : emulators())
    emulated.insert(t);
  EXPECT_EQ(space, emulated) << "add the space's new tiled shapes to emulators()";
}

// The description's check shapes and more: exact tiles, one element, K = 0, K and N multiples of 4 with
// partial tiles everywhere, tile rows that do not fill the last rasterisation group.
std::vector<problem> problems() {
  std::vector<problem> out;
  for (const auto& s : sgemm_spec().check_shapes)
    out.push_back({static_cast<int>(s.at("M").as_int()), static_cast<int>(s.at("N").as_int()),
                   static_cast<int>(s.at("K").as_int())});
  for (const problem p : {problem{1, 1, 1}, problem{3, 5, 0}, problem{128, 128, 16}, problem{200, 132, 36},
                          problem{600, 72, 12}, problem{70, 300, 9}})
    out.push_back(p);
  return out;
}

TEST(sgemm_tiled_emulation, every_tiled_configuration_computes_the_product_on_every_shape) {
  std::mt19937 rng(20261204);
  for (const auto& [t, e] : emulators())
    for (const auto& p : problems()) {
      const auto err = check(t, p, false, rng, {block_fibers::order::forward, block_fibers::order::reverse});
      EXPECT_EQ(err, "") << t.text() << " on M=" << p.M << " N=" << p.N << " K=" << p.K;
    }
}

TEST(sgemm_tiled_emulation, shuffled_thread_orders_and_unaligned_pointers) {
  std::mt19937 rng(7);
  for (const tile_params t : {tile_params{128, 128, 8, 8, 8, 8}, tile_params{64, 64, 16, 4, 4, 1},
                              tile_params{256, 64, 16, 8, 8, 8}, tile_params{64, 128, 16, 8, 4, 8}}) {
    for (const problem p : {problem{200, 268, 204}, problem{130, 136, 40}}) {
      EXPECT_EQ(check(t, p, false, rng, {block_fibers::order::forward, block_fibers::order::shuffled}), "")
          << t.text() << " on M=" << p.M << " N=" << p.N << " K=" << p.K;
      // K and N multiples of 4 but A, B and C one float off 16-byte alignment: the element-wise path.
      EXPECT_EQ(check(t, p, true, rng, {block_fibers::order::forward}), "")
          << t.text() << " unaligned, on M=" << p.M << " N=" << p.N << " K=" << p.K;
    }
  }
}

}  // namespace
}  // namespace kf
