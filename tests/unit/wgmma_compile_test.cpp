// The Hopper warpgroup-MMA (wgmma) alternative of the suite's bf16 GEMM (experiments/kernels/gemm_bf16,
// site `gemm`, choice `wgmma`) without a GPU: its description compiles everything for sm_90a; every
// valid wgmma configuration (launch_bounds 0) renders, resolves its launches on every shape, compiles
// with NVRTC for sm_90a without spills, without ptxas serialising the MMAs (C7515), with registers for
// its accumulators and no more than a thread may have, and fits on an H200 (static occupancy, its
// dynamic shared memory included); the same source compiled for plain sm_90 stops at the kernel's
// #error naming sm_90a (wgmma.mma_async does not exist there). Compilations run on a two-thread pool
// with an on-disk cache in a temporary directory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

fs::path gemm_bf16_yaml() {
  for (const auto& p : test::suite_kernels())
    if (test::suite_kernel_name(p) == "gemm_bf16") return p;
  return {};
}

const compiler& nvrtc() {
  static test::temp_dir dir;
  static compiler c(dir.path() / "nvrtc-cache");
  return c;
}

std::string param_value(const kernel_spec& k, const config& c, const char* name) {
  const auto i = k.space.param_index(name);
  return i ? k.space.value_of(c, *i).str() : std::string("?");
}

// Every valid configuration that chooses wgmma, without launch bounds (the other launch_bounds values
// cap registers on purpose and may spill: slow variants, not wrong ones).
std::vector<config> wgmma_configs(const kernel_spec& k) {
  std::vector<config> out;
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (param_value(k, c, "tensor_core_gemm") == "wgmma" && param_value(k, c, "launch_bounds") == "0")
      out.push_back(c);
  }
  return out;
}

compile_request request(const kernel_spec& k, const rendered_variant& v, const std::string& arch) {
  compile_request r;
  r.source = v.source;
  r.name = fs::path(k.source_file).filename().string();
  r.options = v.options;
  r.name_expressions = {v.entry};
  r.arch = arch;
  return r;
}

TEST(wgmma_compile, gemm_bf16_is_compiled_for_sm_90a_and_other_kernels_for_the_evaluators_arch) {
  register_builtins();
  for (const auto& yaml : test::suite_kernels()) {
    const auto k = load_kernel_spec(yaml.string());
    if (test::suite_kernel_name(yaml) == "gemm_bf16")
      EXPECT_EQ(k.arch, "sm_90a");
    else
      EXPECT_EQ(k.arch, "") << yaml;
  }
}

TEST(wgmma_compile, every_configuration_compiles_for_sm_90a_without_spills_or_serialised_mmas) {
  const auto t0 = std::chrono::steady_clock::now();
  register_builtins();
  const auto yaml = gemm_bf16_yaml();
  ASSERT_FALSE(yaml.empty()) << "no experiments/kernels/gemm_bf16";
  const auto k = load_kernel_spec(yaml.string());
  const auto configs = wgmma_configs(k);
  // wgmma_m x wgmma_n in {64 x 64, 64 x 128, 64 x 256, 128 x 64, 128 x 128}, 1 or 2 warpgroups, 2 to 5
  // stages, less the two rings above 227 KiB (384 rows of 128 bytes x 5 stages).
  ASSERT_EQ(configs.size(), 38u);
  std::vector<shape> shapes = k.time_shapes;
  shapes.insert(shapes.end(), k.check_shapes.begin(), k.check_shapes.end());

  compile_pool pool(nvrtc(), 2, 8);
  std::vector<compile_pool::ticket> tickets;
  std::vector<std::vector<launch_plan>> plans;
  std::vector<std::string> names;
  std::vector<compile_result> results;
  std::size_t taken = 0;
  for (const auto& c : configs) {
    const std::string what = "gemm_bf16 " + k.space.describe(c);
    std::vector<launch_plan> p;
    for (const auto& s : shapes)
      ASSERT_NO_THROW(p.push_back(resolve_launch(k, c, s))) << what;
    rendered_variant v;
    ASSERT_NO_THROW(v = render_variant(k, c)) << what;
    if (tickets.size() - taken >= 8) results.push_back(pool.take(tickets[taken++]));
    tickets.push_back(pool.submit(request(k, v, k.arch)));
    plans.push_back(std::move(p));
    names.push_back(what);
  }
  while (taken < tickets.size())
    results.push_back(pool.take(tickets[taken++]));

  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& r = results[i];
    const auto& what = names[i];
    ASSERT_TRUE(r.ok) << what << " does not compile:\n" << r.log;
    ASSERT_EQ(r.kernels.size(), 1u) << what;
    const auto& m = r.kernels.front().metrics;
    EXPECT_EQ(m.spill_stores_bytes, 0) << what << ":\n" << r.log;
    EXPECT_EQ(m.spill_loads_bytes, 0) << what;
    EXPECT_EQ(m.stack_frame_bytes, 0) << what;
    EXPECT_EQ(r.log.find("C7515"), std::string::npos) << what << ": ptxas serialises the wgmma:\n" << r.log;
    // The accumulators alone take wgmma_m / 64 x wgmma_n / 2 registers per thread.
    const int accumulators = std::stoi(param_value(k, configs[i], "wgmma_m")) / 64 *
                             std::stoi(param_value(k, configs[i], "wgmma_n")) / 2;
    EXPECT_GT(m.registers, accumulators) << what;
    EXPECT_LE(m.registers, 255) << what;
    EXPECT_EQ(m.shared_static_bytes, 0) << what << ": the ring is dynamic shared memory";
    const int groups = std::stoi(param_value(k, configs[i], "wgmma_groups"));
    const int ring = std::stoi(param_value(k, configs[i], "wgmma_stages")) *
                     (groups * std::stoi(param_value(k, configs[i], "wgmma_m")) +
                      std::stoi(param_value(k, configs[i], "wgmma_n"))) *
                     128;
    for (const auto& p : plans[i]) {
      EXPECT_EQ(p.threads(), 128u * static_cast<unsigned>(groups)) << what;
      // The ring (A: rows x 64 bf16, B: 64 x wgmma_n bf16, per stage) and 1 KiB to align it.
      EXPECT_EQ(p.shared_bytes, static_cast<std::uint32_t>(ring + 1024)) << what;
      const auto occ =
          theoretical_occupancy(m, static_cast<int>(p.threads()), static_cast<int>(p.shared_bytes));
      EXPECT_GE(occ.blocks_per_sm, 1)
          << what << " cannot run on an H200 (limited by " << occ.limited_by << ", " << m.registers
          << " registers, " << p.shared_bytes << " B dynamic shared memory)";
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  gemm_bf16 wgmma: " << configs.size() << " configurations compiled for sm_90a in " << secs
            << " s\n";
}

TEST(wgmma_compile, the_wgmma_alternative_refuses_plain_sm_90) {
  register_builtins();
  const auto yaml = gemm_bf16_yaml();
  ASSERT_FALSE(yaml.empty()) << "no experiments/kernels/gemm_bf16";
  const auto k = load_kernel_spec(yaml.string());
  const auto configs = wgmma_configs(k);
  ASSERT_FALSE(configs.empty());
  const auto r = nvrtc().compile(request(k, render_variant(k, configs.front()), "sm_90"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.log.find("needs the architecture-specific target sm_90a"), std::string::npos) << r.log;
  // The other alternatives still compile for plain sm_90 (the default configuration is scalar).
  EXPECT_TRUE(nvrtc().compile(request(k, render_variant(k, k.defaults), "sm_90")).ok);
}

}  // namespace
}  // namespace kf
