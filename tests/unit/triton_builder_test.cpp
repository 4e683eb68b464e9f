// The Triton builder without a GPU (issue 11): Triton suite kernels' baselines and random configurations
// become sm_90 images through the compile servers, with an image per divisibility class of the shapes, the
// reference built once, the scratch pointers appended, and a compile error as compile_failed data.
#include <gtest/gtest.h>

#include <chrono>

#include "evaluators/cuda/builder.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

// <repo>/.venv's Python with triton, or a skip reason.
std::optional<std::string> triton_python() {
  const auto py = test::source_dir() / ".venv/bin/python";
  if (!std::filesystem::exists(py)) return std::nullopt;
  const auto r = test::run_command("'" + py.string() + "' -c 'import triton' 2>&1");
  if (r.status != 0) return std::nullopt;
  return py.string();
}

triton_builder_options options_for(const test::temp_dir& tmp, const std::string& python) {
  triton_builder_options o;
  o.cache_dir = tmp.path() / "triton";
  o.processes = 2;
  o.python = python;
  o.python_path = test::source_dir() / "python";
  o.log_dir = tmp.path() / "logs";
  o.static_filter = false;
  return o;
}

std::vector<build_result> build_all(builder& b, const std::vector<config>& configs) {
  for (std::size_t i = 0; i < configs.size(); ++i)
    b.submit(i, configs[i], i + 1);
  std::vector<build_result> out;
  for (int waited = 0; out.size() < configs.size() && waited < 3000; ++waited)
    if (auto r = b.take(std::chrono::milliseconds(100))) out.push_back(std::move(*r));
  EXPECT_EQ(out.size(), configs.size());
  return out;
}

TEST(triton_builder, suite_kernels_build_for_sm_90) {
  const auto python = triton_python();
  if (!python) GTEST_SKIP() << "<repo>/.venv with triton is missing (scripts/install-deps makes it)";
  register_builtins();
  test::temp_dir tmp;
  for (const char* name : {"softmax", "layernorm", "gemm_bf16", "flash_attention", "planted"}) {
    const auto desc = test::source_dir() / "experiments/kernels-triton" / name / "kernel.yaml";
    auto k = std::make_shared<const kernel_spec>(load_kernel_spec(desc.string()));
    ASSERT_EQ(k->language, "triton");
    auto b = make_triton_builder(k, options_for(tmp, *python), device_limits{});
    ASSERT_TRUE(b->reference().has_value()) << name;
    const auto configs = test::suite_genomes(*k, name, 2);
    for (const auto& r : build_all(*b, configs)) {
      ASSERT_EQ(r.st, status::ok) << name << " " << k->space.describe(configs[r.id]) << ": " << r.error;
      EXPECT_TRUE(std::filesystem::exists(r.image.path)) << name;
      ASSERT_EQ(r.shapes.size(), k->check_shapes.size() + k->time_shapes.size());
      for (const auto& s : r.shapes) {
        // Block 32 x num_warps; the entry's arguments, then Triton's two scratch pointers.
        EXPECT_EQ(s.candidate.block[0] % 32, 0u);
        ASSERT_EQ(s.args.size(), k->args.size() + 2) << name;
        EXPECT_EQ(s.args[s.args.size() - 2].name, "triton.global_scratch");
        EXPECT_TRUE(s.candidate_module.has_value());
        EXPECT_TRUE(s.reference_module.has_value());
      }
      EXPECT_GE(r.metrics.at("static.images"), 1.0);
      EXPECT_GT(r.metrics.at("static.registers"), 0.0);
    }
  }
}

TEST(triton_builder, shapes_that_differ_in_divisibility_get_their_own_image) {
  const auto python = triton_python();
  if (!python) GTEST_SKIP() << "<repo>/.venv with triton is missing (scripts/install-deps makes it)";
  register_builtins();
  test::temp_dir tmp;
  // softmax: the timed shape (cols 4096) is a multiple of 16, the check shapes (cols 777, 65, ...) are not.
  const auto desc = test::source_dir() / "experiments/kernels-triton/softmax/kernel.yaml";
  auto k = std::make_shared<const kernel_spec>(load_kernel_spec(desc.string()));
  auto b = make_triton_builder(k, options_for(tmp, *python), device_limits{});
  const auto r = build_all(*b, {k->defaults}).at(0);
  ASSERT_EQ(r.st, status::ok) << r.error;
  EXPECT_EQ(r.metrics.at("static.images"), 2.0);
  EXPECT_NE(r.shapes.front().candidate_module->path, r.shapes.back().candidate_module->path);
  EXPECT_EQ(r.image.path, r.shapes.back().candidate_module->path);  // the timed shape's image
}

TEST(triton_builder, a_compile_error_is_a_compile_failed_result_with_tritons_message) {
  const auto python = triton_python();
  if (!python) GTEST_SKIP() << "<repo>/.venv with triton is missing (scripts/install-deps makes it)";
  register_builtins();
  test::temp_dir tmp;
  test::write_file(tmp.path() / "k.py", R"PY(
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
)PY");
  test::write_file(tmp.path() / "kernel.yaml", R"YAML(
language: triton
source: k.py
entry: k
parameters:
  - {name: BLOCK, values: [128, 100], default: 128}
arguments:
  - {name: x, buffer: f32, size: n}
  - {name: y, buffer: f32, size: n, role: out}
  - {name: n, scalar: i32, value: n}
grid: ["(n + BLOCK - 1) // BLOCK"]
shapes:
  time: [{n: 1000}]
reference: baseline
)YAML");
  auto k = std::make_shared<const kernel_spec>(load_kernel_spec((tmp.path() / "kernel.yaml").string()));
  auto b = make_triton_builder(k, options_for(tmp, *python), device_limits{});
  config bad = k->defaults;
  bad[0] = 1;  // BLOCK = 100: not a power of two
  const auto r = build_all(*b, {bad}).at(0);
  EXPECT_EQ(r.st, status::compile_failed);
  EXPECT_NE(r.error.find("power of 2"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace kf
