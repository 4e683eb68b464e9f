// The tiled alternative of the suite's SGEMM (experiments/kernels/sgemm, site `gemm`, instance `impl`,
// choice `tiled`) without a GPU: every valid tiled configuration renders, resolves its launches on every
// shape (a one-dimensional block of (tiled_bm / tiled_tm) x (tiled_bn / tiled_tn) threads, the two-slot
// ring as dynamic shared memory), compiles with NVRTC for sm_90 without spills or a stack frame, with at
// most 255 registers and within its launch bounds, and fits on an H200 (static occupancy: at least the
// launch bounds' minimum blocks per SM). The configurations that differ only in tiled_group (the block
// rasterisation: two integer divisions) compile once, at the default group 8. Compilations run on a
// two-thread pool with an on-disk cache in a temporary directory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

fs::path sgemm_yaml() {
  return test::suite_kernel_yaml("sgemm");
}

const compiler& nvrtc() {
  static test::temp_dir dir;
  static compiler c(dir.path() / "nvrtc-cache");
  return c;
}

using test::int_param;
using test::param_value;

// Every valid configuration that chooses the tiled alternative.
std::vector<config> tiled_configs(const kernel_spec& k) {
  std::vector<config> out;
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (param_value(k, c, "impl") == "tiled") out.push_back(c);
  }
  return out;
}

compile_request request(const kernel_spec& k, const rendered_variant& v) {
  compile_request r;
  r.source = v.source;
  r.name = fs::path(k.source_file).filename().string();
  r.options = v.options;
  r.name_expressions = {v.entry};
  r.arch = k.arch.empty() ? "sm_90" : k.arch;
  return r;
}

TEST(sgemm_tiled_compile, the_space_has_the_tiled_alternative_and_pins_the_other_parameters) {
  register_builtins();
  const auto yaml = sgemm_yaml();
  ASSERT_FALSE(yaml.empty()) << "no experiments/kernels/sgemm";
  const auto k = load_kernel_spec(yaml.string());
  EXPECT_EQ(param_value(k, k.defaults, "impl"), "simple") << "the baseline stays the simple kernel";
  const auto configs = tiled_configs(k);
  // tiled_bm x tiled_bn x tiled_bk x tiled_tm x tiled_tn with 64-512 threads in 4 x 8 warps, whole
  // float4 loads and 8 x 8 thread tiles 16 deep only above a 128-register cap: 21 shapes at launch bounds
  // 1, 128 x 128 x 8 (8 x 8 per thread) also at 2; times 2 groups.
  ASSERT_EQ(configs.size(), 44u);
  // No two tiled configurations render the same source (the simple path's parameters, its transforms'
  // and read_only are pinned), and none renders like the baseline.
  std::set<std::string> sources{render_variant(k, k.defaults).source};
  for (const auto& c : configs) {
    EXPECT_EQ(param_value(k, c, "read_only"), "none");
    EXPECT_EQ(param_value(k, c, "pipeline_k_tiles"), "1");
    EXPECT_NE(param_value(k, c, "launch_bounds"), "0") << "the tiled kernel always has launch bounds";
    EXPECT_TRUE(sources.insert(render_variant(k, c).source).second) << k.space.describe(c);
  }
}

// The simple alternative's sites (pipeline, unroll) sit inside the `gemm` site's first group: every
// transform still applies. Every 37th valid configuration (~1900 of ~72000; all of them render, checked
// once in 63 s) and every tiled one.
TEST(sgemm_tiled_compile, valid_configurations_render) {
  const auto t0 = std::chrono::steady_clock::now();
  register_builtins();
  const auto yaml = sgemm_yaml();
  ASSERT_FALSE(yaml.empty()) << "no experiments/kernels/sgemm";
  const auto k = load_kernel_spec(yaml.string());
  const auto& valid = k.space.valid();
  std::size_t failures = 0;
  const auto impl = *k.space.param_index("impl");
  std::size_t rendered = 0;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (i % 37 != 0 && k.space.value_of(c, impl).str() != "tiled") continue;
    ++rendered;
    try {
      (void)render_variant(k, c);
    } catch (const std::exception& e) {
      if (++failures <= 5) ADD_FAILURE() << k.space.describe(c) << " does not render: " << e.what();
    }
  }
  EXPECT_EQ(failures, 0u);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  sgemm: " << rendered << " of " << valid.size() << " configurations rendered in " << secs
            << " s\n";
}

TEST(sgemm_tiled_compile, every_tiled_configuration_compiles_for_sm_90_without_spills) {
  const auto t0 = std::chrono::steady_clock::now();
  register_builtins();
  const auto yaml = sgemm_yaml();
  ASSERT_FALSE(yaml.empty()) << "no experiments/kernels/sgemm";
  const auto k = load_kernel_spec(yaml.string());
  std::vector<config> configs;
  for (const auto& c : tiled_configs(k))
    if (int_param(k, c, "tiled_group") == 8) configs.push_back(c);
  ASSERT_EQ(configs.size(), 22u);
  std::vector<shape> shapes = k.time_shapes;
  shapes.insert(shapes.end(), k.check_shapes.begin(), k.check_shapes.end());

  compile_pool pool(nvrtc(), 2, 8);
  std::vector<compile_pool::ticket> tickets;
  std::vector<std::vector<launch_plan>> plans;
  std::vector<std::string> names;
  std::vector<compile_result> results;
  std::size_t taken = 0;
  for (const auto& c : configs) {
    const std::string what = "sgemm " + k.space.describe(c);
    std::vector<launch_plan> p;
    for (const auto& s : shapes)
      ASSERT_NO_THROW(p.push_back(resolve_launch(k, c, s))) << what;
    rendered_variant v;
    ASSERT_NO_THROW(v = render_variant(k, c)) << what;
    if (tickets.size() - taken >= 8) results.push_back(pool.take(tickets[taken++]));
    tickets.push_back(pool.submit(request(k, v)));
    plans.push_back(std::move(p));
    names.push_back(what);
  }
  while (taken < tickets.size())
    results.push_back(pool.take(tickets[taken++]));

  std::cout << "  bm  bn  bk tm tn lb threads regs smem_B\n";
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    const auto& r = results[i];
    const auto& what = names[i];
    ASSERT_TRUE(r.ok) << what << " does not compile:\n" << r.log;
    ASSERT_EQ(r.kernels.size(), 1u) << what;
    const auto& m = r.kernels.front().metrics;
    EXPECT_EQ(m.spill_stores_bytes, 0) << what << ":\n" << r.log;
    EXPECT_EQ(m.spill_loads_bytes, 0) << what;
    EXPECT_EQ(m.stack_frame_bytes, 0) << what;
    EXPECT_EQ(m.shared_static_bytes, 0) << what << ": the ring is dynamic shared memory";
    const int bm = int_param(k, c, "tiled_bm"), bn = int_param(k, c, "tiled_bn"),
              bk = int_param(k, c, "tiled_bk");
    const int tm = int_param(k, c, "tiled_tm"), tn = int_param(k, c, "tiled_tn");
    const int min_blocks = int_param(k, c, "launch_bounds");
    const int threads = bm / tm * bn / tn;
    // The accumulators alone take tm x tn registers per thread.
    EXPECT_GT(m.registers, tm * tn) << what;
    EXPECT_LE(m.registers, 255) << what;
    EXPECT_LE(m.registers * threads * min_blocks, 65536) << what << ": over its launch bounds";
    EXPECT_EQ(m.max_threads_per_block, threads) << what;
    const int ring = 2 * bk * (bm + 4 + bn) * 4;
    for (const auto& p : plans[i]) {
      EXPECT_EQ(p.threads(), static_cast<unsigned>(threads)) << what;
      EXPECT_EQ(p.block[1], 1u) << what;
      EXPECT_EQ(p.shared_bytes, static_cast<std::uint32_t>(ring)) << what;
      const auto occ =
          theoretical_occupancy(m, static_cast<int>(p.threads()), static_cast<int>(p.shared_bytes));
      EXPECT_GE(occ.blocks_per_sm, min_blocks)
          << what << " (limited by " << occ.limited_by << ", " << m.registers << " registers, "
          << p.shared_bytes << " B dynamic shared memory)";
    }
    std::cout << "  " << std::setw(3) << bm << " " << std::setw(3) << bn << " " << std::setw(3) << bk << " "
              << std::setw(2) << tm << " " << std::setw(2) << tn << " " << std::setw(2) << min_blocks << " "
              << std::setw(7) << threads << " " << std::setw(4) << m.registers << " " << std::setw(6) << ring
              << "\n";
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  sgemm tiled: " << configs.size() << " configurations compiled for sm_90 in " << secs
            << " s\n";
}

}  // namespace
}  // namespace kf
