// A kernel description's `defines:` (docs/kernel.md): extra macros of every variant, expressions over the
// parameters and the first time shape; misuse is a config error at defines.<name>.
#include <gtest/gtest.h>

#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const char* description = R"YAML(
name: fill
source: fill.cu
entry: fill
parameters:
  - {name: block, values: [64, 128]}
  - {name: path, values: [plain, fixed]}
defines: {FIXED_N: "n if path == 'fixed' else 0", THREADS_X2: "2 * block"}
arguments:
  - {name: out, buffer: f32, size: n, role: out}
  - {name: n, scalar: i32, value: n}
grid: ["(n + block - 1) // block"]
block: [block]
shapes:
  time: [{n: 1000}, {n: 5}]
  check: [{n: 77}]
reference: baseline
)YAML";

const char* source = R"CUDA(
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = FIXED_N + THREADS_X2;
}
)CUDA";

std::filesystem::path write_kernel(const test::temp_dir& tmp, const std::string& yaml) {
  test::write_file(tmp.path() / "fill.cu", source);
  return test::write_file(tmp.path() / "kernel.yaml", yaml);
}

std::string config_error_of(const std::string& yaml) {
  test::temp_dir tmp;
  try {
    (void)load_kernel_spec(write_kernel(tmp, yaml).string());
  } catch (const config_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(kernel_defines, are_macros_of_the_parameters_and_the_first_time_shape) {
  test::temp_dir tmp;
  const auto k = load_kernel_spec(write_kernel(tmp, description).string());
  config c = k.defaults;
  const auto path = *k.space.param_index("path"), block = *k.space.param_index("block");
  auto source_of = [&](const std::string& p, std::int64_t b) {
    for (std::size_t i = 0; i < k.space.params()[path].values.size(); ++i)
      if (k.space.params()[path].values[i].str() == p) c[path] = i;
    for (std::size_t i = 0; i < k.space.params()[block].values.size(); ++i)
      if (k.space.params()[block].values[i].as_int() == b) c[block] = i;
    return render_variant(k, c).source;
  };
  const auto fixed = source_of("fixed", 128);
  EXPECT_NE(fixed.find("#define FIXED_N 1000\n"), std::string::npos) << fixed;  // the first time shape's n
  EXPECT_NE(fixed.find("#define THREADS_X2 256\n"), std::string::npos) << fixed;
  const auto plain = source_of("plain", 64);
  EXPECT_NE(plain.find("#define FIXED_N 0\n"), std::string::npos) << plain;
  EXPECT_NE(plain.find("#define THREADS_X2 128\n"), std::string::npos) << plain;
}

TEST(kernel_defines, misuse_is_a_config_error_at_its_key) {
  auto with = [](const std::string& defines) {
    std::string d = description;
    const std::string old = R"(defines: {FIXED_N: "n if path == 'fixed' else 0", THREADS_X2: "2 * block"})";
    d.replace(d.find(old), old.size(), defines);
    return config_error_of(d);
  };
  auto e = with(R"(defines: {block: "2"})");
  EXPECT_NE(e.find("defines.block"), std::string::npos) << e;
  EXPECT_NE(e.find("also a tuning parameter"), std::string::npos) << e;
  e = with(R"(defines: {WIDTH: "m * 2"})");
  EXPECT_NE(e.find("defines.WIDTH"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown name 'm'"), std::string::npos) << e;
  e = with(R"(defines: {"2X": "1"})");
  EXPECT_NE(e.find("C identifier"), std::string::npos) << e;
  e = with(R"(defines: [X])");
  EXPECT_NE(e.find("defines"), std::string::npos) << e;
  e = with("injection: template\ndefines: {X: \"1\"}");
  EXPECT_NE(e.find("injection: defines"), std::string::npos) << e;
}

// The suite's conv2d fixes its filter size at compile time on the register-row path only.
TEST(kernel_defines, conv2d_fixes_the_filter_size_on_its_register_row_path) {
  const auto k = test::load_suite_kernel("conv2d");
  const auto impl = *k.space.param_index("impl");
  std::size_t rows = 0, direct = 0;
  for (std::size_t i = 0; i < k.space.valid().size() && (rows < 3 || direct < 3); ++i) {
    const config c = k.space.valid().at(i);
    const auto src = render_variant(k, c).source;
    if (k.space.value_of(c, impl).str() == "rows") {
      ++rows;
      EXPECT_NE(src.find("#define FILTER_R 15\n"), std::string::npos);
    } else {
      ++direct;
      EXPECT_NE(src.find("#define FILTER_R 0\n"), std::string::npos);
    }
  }
  EXPECT_GE(rows, 3u);
  EXPECT_GE(direct, 3u);
}

}  // namespace
}  // namespace kf
