// The kernel suite without a GPU: every experiments/kernels/*/kernel.yaml found at run time under the
// source tree (but the `planted` fault fixture) loads; its default configuration launches on every shape
// and renders the source exactly as written (each transform's default leaves it unchanged, which also
// checks that every site annotation is well-formed); its roofline bounds evaluate on the time shape; the
// baseline, the reference and seeded random valid configurations render (every transform applies: the
// descriptions' constraints exclude the combinations that would not), resolve their launches on every
// shape, compile with NVRTC for sm_90 (or the description's own `arch`, e.g. sm_90a) and fit on an H200 by
// the static occupancy rules (at least one block per SM on every shape). Compilations run on a two-thread
// compile pool with an on-disk cache in a temporary directory; each kernel prints its timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/evaluators/cuda.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "kforge/random.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

constexpr int random_configs = 24;  // per kernel, besides the baseline
// gemm_bf16_cute: each CuTe instantiation takes 10-70 s of NVRTC on a 2-core machine, so only 2 random
// configurations here; tests/unit/template_kernel_test.cpp compiles a larger seeded sample.
constexpr int random_template_configs = 2;

/// One shared compiler for the whole file: its cache lives in a temporary directory.
const compiler& nvrtc() {
  static test::temp_dir dir;
  static compiler c(dir.path() / "nvrtc-cache");
  return c;
}

std::string shape_text(const shape& s) {
  std::string t;
  for (const auto& [k, v] : s)
    t += (t.empty() ? "" : ", ") + k + "=" + v.repr();
  return "{" + t + "}";
}

/// One compilation and what to check on its result.
struct job {
  std::string what;
  compile_request request;
  std::function<void(const compile_result&)> check;
};

/// Compiles the jobs on a two-thread pool (a bounded number in flight), then checks each in order.
void compile_all(std::vector<job>& jobs) {
  compile_pool pool(nvrtc(), 2, 8);
  std::vector<compile_pool::ticket> tickets(jobs.size());
  std::vector<compile_result> results(jobs.size());
  std::size_t taken = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (i - taken >= 8) {
      results[taken] = pool.take(tickets[taken]);
      ++taken;
    }
    tickets[i] = pool.submit(jobs[i].request);
  }
  for (; taken < jobs.size(); ++taken)
    results[taken] = pool.take(tickets[taken]);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& r = results[i];
    EXPECT_TRUE(r.ok) << jobs[i].what << " does not compile:\n" << r.log;
    if (!r.ok) continue;
    ASSERT_EQ(r.kernels.size(), 1u) << jobs[i].what;
    if (jobs[i].check) jobs[i].check(r);
  }
}

class kernel_suite : public ::testing::TestWithParam<fs::path> {};

TEST(kernel_suite_discovery, finds_the_suite) {
  const auto all = test::suite_kernels();
  std::vector<std::string> names;
  for (const auto& p : all)
    names.push_back(test::suite_kernel_name(p));
  for (const char* expected : {"saxpy", "bias_gelu", "reduce_sum", "softmax", "layernorm", "transpose",
                               "sgemm", "gemm_bf16", "gemm_bf16_cute", "conv2d", "heat2d", "attention"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << "no experiments/kernels/" << expected;
}

TEST_P(kernel_suite, loads_renders_and_compiles_for_sm_90) {
  const auto t0 = std::chrono::steady_clock::now();
  register_builtins();
  const fs::path yaml = GetParam();
  const auto name = test::suite_kernel_name(yaml);
  kernel_spec k;
  ASSERT_NO_THROW(k = load_kernel_spec(yaml.string())) << yaml;
  ASSERT_FALSE(k.time_shapes.empty());
  EXPECT_FALSE(k.check_shapes.empty()) << name << ": no check shapes";
  std::vector<shape> shapes = k.time_shapes;
  shapes.insert(shapes.end(), k.check_shapes.begin(), k.check_shapes.end());

  // The default configuration: launches everywhere, renders the source as written.
  for (const auto& s : shapes)
    EXPECT_NO_THROW(resolve_launch(k, k.defaults, s)) << name << " default on " << shape_text(s);
  rendered_variant base;
  ASSERT_NO_THROW(base = render_variant(k, k.defaults)) << name;
  // With injection template the parameters go into the entry's template arguments, not #defines.
  EXPECT_EQ(base.source,
            k.injection == "template" ? k.source : with_defines(k, k.defaults, k.source, k.source_file))
      << name << ": the default configuration does not render the source unchanged";

  // Roofline bounds on the (first) time shape.
  ASSERT_TRUE(k.bytes.has_value()) << name << ": no roofline bytes";
  roofline_bound rb;
  ASSERT_NO_THROW(rb = roofline(k, k.defaults, k.time_shapes.front())) << name;
  ASSERT_TRUE(rb.bytes.has_value());
  EXPECT_TRUE(std::isfinite(*rb.bytes) && *rb.bytes > 0) << name << ": roofline bytes " << *rb.bytes;
  if (rb.flops) {
    EXPECT_TRUE(std::isfinite(*rb.flops) && *rb.flops >= 0) << name << ": roofline flops " << *rb.flops;
  }
  const double floor_ms = roofline_floor_ms(k, rb, h200_peaks);

  // The configurations to compile: the baseline and seeded random valid ones.
  const std::vector<config> configs =
      test::suite_genomes(k, name, name == "gemm_bf16_cute" ? random_template_configs : random_configs);

  std::vector<job> jobs;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    const std::string what = name + (i == 0 ? " baseline " : " config ") + k.space.describe(c);
    EXPECT_TRUE(k.space.is_valid(c)) << what;
    std::vector<launch_plan> plans;
    for (const auto& s : shapes) {
      try {
        plans.push_back(resolve_launch(k, c, s));
      } catch (const error& e) {
        ADD_FAILURE() << what << " cannot launch on " << shape_text(s) << ": " << e.what();
      }
    }
    rendered_variant v;
    try {
      v = render_variant(k, c);
    } catch (const error& e) {
      ADD_FAILURE() << what << " does not render: " << e.what();
      continue;
    }
    job j;
    j.what = what;
    // As the nvrtc builder forms it: the include folders (the description's include_dirs and
    // include_packages) as -I options and the headers found there.
    j.request = variant_compile_request(k, v, k.source_file, "sm_90");
    j.check = [what, plans](const compile_result& res) {
      const auto& m = res.kernels.front().metrics;
      if (m.spill_stores_bytes > 0)  // allowed (a slow variant, not a wrong one): reported
        std::cout << "  note: " << what << " spills " << m.spill_stores_bytes << " bytes\n";
      for (const auto& p : plans) {
        const auto occ =
            theoretical_occupancy(m, static_cast<int>(p.threads()), static_cast<int>(p.shared_bytes));
        EXPECT_GE(occ.blocks_per_sm, 1) << what << " cannot run on an H200 (limited by " << occ.limited_by
                                        << ", " << m.registers << " registers, " << m.shared_static_bytes
                                        << " B static + " << p.shared_bytes << " B dynamic shared memory)";
      }
    };
    jobs.push_back(std::move(j));
  }
  if (k.reference.k == reference_spec::kind::kernel) {
    job j;
    j.what = name + " reference " + k.reference.entry;
    j.request.source = k.injection == "defines"
                           ? with_defines(k, k.defaults, k.reference.source, k.reference.source_file)
                           : k.reference.source;
    j.request.name = fs::path(k.reference.source_file).filename().string();
    j.request.options = k.compiler_options;
    j.request.options.insert(j.request.options.end(), k.reference.options.begin(), k.reference.options.end());
    for (const auto& d : k.include_dirs)
      j.request.options.push_back("-I" + d.string());
    j.request.name_expressions = {k.reference.entry};
    j.request.arch = k.arch.empty() ? "sm_90" : k.arch;
    jobs.push_back(std::move(j));
  }
  compile_all(jobs);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  " << name << ": " << k.space.params().size() << " parameters, " << jobs.size()
            << " NVRTC compilations in " << secs << " s; roofline at " << shape_text(k.time_shapes.front())
            << ": " << *rb.bytes << " bytes, " << rb.flops.value_or(0) << " flops, H200 floor " << floor_ms
            << " ms\n";
}

INSTANTIATE_TEST_SUITE_P(experiments, kernel_suite, ::testing::ValuesIn(test::suite_kernels()),
                         [](const ::testing::TestParamInfo<fs::path>& p) {
                           return test::suite_kernel_name(p.param);
                         });

}  // namespace
}  // namespace kf
