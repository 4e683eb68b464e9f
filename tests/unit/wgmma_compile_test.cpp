// The Hopper warpgroup-MMA (wgmma) alternative of the suite's bf16 GEMM (experiments/kernels/gemm_bf16,
// site `gemm`, choice `wgmma`) without a GPU: its description compiles everything for sm_90a; every
// valid wgmma configuration (launch_bounds 0) of each load path (cp.async; TMA with mbarriers; TMA with a
// producer warpgroup) renders, resolves its launches on every shape (TMA: tensor maps tmA and tmB on the
// shapes with 16-byte aligned rows, zeros on the others), compiles with NVRTC for sm_90a without spills,
// without ptxas serialising the MMAs (C7515), with registers for its accumulators and no more than a
// thread may have, and fits on an H200 (static occupancy of its whole block, producer included, and its
// dynamic shared memory); the same source compiled for plain sm_90 stops at the kernel's #error naming
// sm_90a (wgmma.mma_async does not exist there). One TMA configuration's rendered source is a golden file
// (tests/unit/golden/kernels; KFORGE_UPDATE_GOLDEN=1 rewrites it). Compilations run on a two-thread pool
// with an on-disk cache in a temporary directory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

const compiler& nvrtc() {
  static test::temp_dir dir;
  static compiler c(dir.path() / "nvrtc-cache");
  return c;
}

using test::int_param;
using test::param_value;

// Every valid configuration that chooses wgmma, without launch bounds (the other launch_bounds values
// cap registers on purpose and may spill: slow variants, not wrong ones); with `tma` and `producer` given,
// only those with these values of wgmma_tma and wgmma_producer.
std::vector<config> wgmma_configs(const kernel_spec& k, int tma = -1, int producer = -1) {
  std::vector<config> out;
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (param_value(k, c, "tensor_core_gemm") != "wgmma" || param_value(k, c, "launch_bounds") != "0")
      continue;
    if (tma >= 0 && int_param(k, c, "wgmma_tma") != tma) continue;
    if (producer >= 0 && int_param(k, c, "wgmma_producer") != producer) continue;
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
    const auto name = test::suite_kernel_name(yaml);
    if (name == "gemm_bf16" || name == "gemm_bf16_cute")  // wgmma
      EXPECT_EQ(k.arch, "sm_90a");
    else
      EXPECT_EQ(k.arch, "") << yaml;
  }
}

// Compiles `configs` (wgmma configurations of one load path, `label`) and checks each one as the file's
// comment says.
void check_configurations(const kernel_spec& k, const std::vector<config>& configs,
                          const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
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
    EXPECT_EQ(r.log.find("serializ"), std::string::npos) << what << ": ptxas serialises the wgmma:\n"
                                                         << r.log;
    const auto& c = configs[i];
    // The accumulators alone take wgmma_m / 64 x wgmma_n / 2 registers per thread.
    const int accumulators = int_param(k, c, "wgmma_m") / 64 * int_param(k, c, "wgmma_n") / 2;
    EXPECT_GT(m.registers, accumulators) << what;
    EXPECT_LE(m.registers, 255) << what;
    EXPECT_EQ(m.shared_static_bytes, 0) << what << ": the ring is dynamic shared memory";
    const int groups = int_param(k, c, "wgmma_groups");
    const int tma = int_param(k, c, "wgmma_tma");
    const int producer = int_param(k, c, "wgmma_producer");
    const int stages = int_param(k, c, "wgmma_stages");
    const int rows = groups * int_param(k, c, "wgmma_m");
    const int ring = stages * (rows + int_param(k, c, "wgmma_n")) * 128;
    for (std::size_t si = 0; si < plans[i].size(); ++si) {
      const auto& p = plans[i][si];
      EXPECT_EQ(p.threads(), 128u * static_cast<unsigned>(groups + producer)) << what;
      // The ring (A: rows x 64 bf16, B: 64 x wgmma_n bf16, per stage), with TMA a full and an empty
      // mbarrier per stage, and 1 KiB to align it.
      EXPECT_EQ(p.shared_bytes, static_cast<std::uint32_t>(ring + 16 * stages * tma + 1024)) << what;
      const auto occ =
          theoretical_occupancy(m, static_cast<int>(p.threads()), static_cast<int>(p.shared_bytes));
      EXPECT_GE(occ.blocks_per_sm, 1)
          << what << " cannot run on an H200 (limited by " << occ.limited_by << ", " << m.registers
          << " registers, " << p.threads() << " threads, " << p.shared_bytes << " B dynamic shared memory)";
      // Tensor maps: made where TMA is on and the rows are 16-byte aligned (the kernel's own test), with
      // the boxes its copies and expect_tx byte count assume.
      ASSERT_EQ(p.args.size(), 8u) << what;
      const auto& ta = p.args[6].tensor_map;
      const auto& tb = p.args[7].tensor_map;
      ASSERT_TRUE(ta && tb) << what;
      const auto K = p.problem.at("K").as_int(), N = p.problem.at("N").as_int();
      const bool aligned = K % 8 == 0 && N % 8 == 0;
      EXPECT_EQ(ta->enabled, tma == 1 && aligned) << what << " shape " << si;
      EXPECT_EQ(tb->enabled, tma == 1 && aligned) << what << " shape " << si;
      if (ta->enabled) {
        EXPECT_EQ(ta->buffer, 3u);
        EXPECT_EQ(tb->buffer, 4u);
        EXPECT_EQ(ta->box[0] * 2u, 128u);
        EXPECT_EQ(ta->box[1], static_cast<std::uint32_t>(rows));
        EXPECT_EQ(tb->box[0] * 2u, 128u);
        EXPECT_EQ(tb->box[1], 64u);
        EXPECT_EQ(ta->swizzle, 128u);
        EXPECT_EQ(tb->swizzle, 128u);
        EXPECT_EQ(ta->dims[0], static_cast<std::uint64_t>(K));
        EXPECT_EQ(tb->dims[0], static_cast<std::uint64_t>(N));
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  gemm_bf16 wgmma (" << label << "): " << configs.size()
            << " configurations compiled for sm_90a in " << secs << " s\n";
}

kernel_spec gemm_bf16() {
  return test::load_suite_kernel("gemm_bf16");
}

TEST(wgmma_compile, every_cp_async_configuration_compiles_for_sm_90a_without_spills_or_serialised_mmas) {
  const auto k = gemm_bf16();
  const auto configs = wgmma_configs(k, 0, 0);
  // wgmma_m x wgmma_n in {64 x 64, 64 x 128, 64 x 256, 128 x 64, 128 x 128}, 1 or 2 warpgroups, 2 to 5
  // stages, less the two rings above 227 KiB (384 rows of 128 bytes x 5 stages).
  ASSERT_EQ(configs.size(), 38u);
  check_configurations(k, configs, "cp.async");
}

TEST(wgmma_compile, every_tma_configuration_compiles_for_sm_90a_without_spills_or_serialised_mmas) {
  const auto k = gemm_bf16();
  const auto configs = wgmma_configs(k, 1, 0);
  ASSERT_EQ(configs.size(), 38u);  // the same tiles and rings (the mbarriers' 16 bytes per stage fit)
  check_configurations(k, configs, "TMA");
}

TEST(wgmma_compile, every_tma_producer_configuration_compiles_for_sm_90a_and_fits_with_its_producer) {
  const auto k = gemm_bf16();
  const auto configs = wgmma_configs(k, 1, 1);
  ASSERT_EQ(configs.size(), 38u);
  check_configurations(k, configs, "TMA, producer warpgroup");
  // No producer without TMA, and outside the wgmma alternative both stay 0.
  EXPECT_TRUE(wgmma_configs(k, 0, 1).empty());
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    if (param_value(k, c, "tensor_core_gemm") == "wgmma") continue;
    EXPECT_EQ(int_param(k, c, "wgmma_tma") + int_param(k, c, "wgmma_producer"), 0) << k.space.describe(c);
  }
}

// One TMA configuration with a producer warpgroup, rendered as the cuda evaluator compiles it: a golden
// file, so that a change of the kernel's TMA path shows in review as a diff of what runs.
TEST(wgmma_compile, a_tma_producer_configuration_renders_as_the_golden_file) {
  const auto k = gemm_bf16();
  config c = k.defaults;
  auto set = [&](const char* name, const value& v) {
    const auto i = k.space.param_index(name);
    ASSERT_TRUE(i.has_value()) << name;
    const auto vi = k.space.value_index(*i, v);
    ASSERT_TRUE(vi.has_value()) << name << " " << v.repr();
    c[*i] = static_cast<std::uint32_t>(*vi);
  };
  set("tensor_core_gemm", value("wgmma"));
  set("wgmma_m", value(128));
  set("wgmma_n", value(128));
  set("wgmma_groups", value(2));
  set("wgmma_stages", value(4));
  set("wgmma_tma", value(1));
  set("wgmma_producer", value(1));
  ASSERT_TRUE(k.space.is_valid(c)) << k.space.describe(c);
  const auto v = render_variant(k, c);
  const auto path = test::source_dir() / "tests/unit/golden/kernels/gemm_bf16.wgmma_tma_producer.expected.cu";
  if (const char* u = std::getenv("KFORGE_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    test::write_file(path, v.source);
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing (KFORGE_UPDATE_GOLDEN=1 writes it)";
  std::ifstream in(path, std::ios::binary);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(v.source, expected.str()) << "the rendered source differs from " << path
                                      << " (KFORGE_UPDATE_GOLDEN=1 rewrites it; review the diff)";
  EXPECT_EQ(v.entry, "gemm_bf16");
  // Its launch at the time shape: 3 warpgroups, the ring and 8 mbarriers, both maps made.
  const auto p = resolve_launch(k, c, k.time_shapes.front());
  EXPECT_EQ(p.threads(), 384u);
  EXPECT_EQ(p.shared_bytes, 4u * (256 + 128) * 128 + 4 * 16 + 1024);
  EXPECT_EQ(p.grid[0], 4096u / 128);
  EXPECT_EQ(p.grid[1], 4096u / 256);
  EXPECT_TRUE(p.args[6].tensor_map->enabled);
  EXPECT_TRUE(p.args[7].tensor_map->enabled);
  EXPECT_EQ(p.args[6].tensor_map->strides[0], 4096u * 2);
}

TEST(wgmma_compile, the_wgmma_alternative_refuses_plain_sm_90) {
  register_builtins();
  const auto yaml = test::suite_kernel_yaml("gemm_bf16");
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
