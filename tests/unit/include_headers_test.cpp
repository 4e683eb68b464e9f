// #include'd headers of a kernel (issue 14 item 10): they resolve from the kernel's folder and the
// description's include_dirs whatever the working directory, and an edit to one of them changes the
// compile cache key (never serving the old binary).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include "evaluators/cuda/builder.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const char* kernel_source = R"CUDA(
#include "helper.h"
#include "common/scale.h"
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = HELPER_VALUE * SCALE;
}
)CUDA";

const char* description = R"YAML(
name: fill
source: src/fill.cu
entry: fill
include_dirs: [inc]
parameters:
  - {name: block, values: [64, 128]}
arguments:
  - {name: out, buffer: f32, size: n, role: out}
  - {name: n, scalar: i32, value: n}
grid: ["(n + block - 1) // block"]
block: [block]
shapes:
  time: [{n: 1000}]
reference: baseline
)YAML";

// Builds the default configuration and returns the CUBIN file it was served from.
std::string build_once(const std::filesystem::path& desc, const std::filesystem::path& cache) {
  auto k = std::make_shared<const kernel_spec>(load_kernel_spec(desc.string()));
  nvrtc_builder_options o;
  o.cache_dir = cache;
  o.threads = 1;
  auto b = make_nvrtc_builder(k, o, device_limits{});
  b->submit(1, k->defaults, 1);
  for (int i = 0; i < 600; ++i)
    if (auto r = b->take(std::chrono::milliseconds(100))) {
      EXPECT_EQ(r->st, status::ok) << r->error;
      return r->image.path;
    }
  ADD_FAILURE() << "no build result";
  return {};
}

TEST(include_headers, resolve_from_the_kernel_folder_and_invalidate_the_cache_when_edited) {
  register_builtins();
  test::temp_dir tmp;
  test::write_file(tmp.path() / "src/fill.cu", kernel_source);
  test::write_file(tmp.path() / "src/helper.h", "#define HELPER_VALUE 1.0f\n");
  test::write_file(tmp.path() / "inc/common/scale.h", "#define SCALE 2.0f\n");
  const auto desc = test::write_file(tmp.path() / "kernel.yaml", description);
  // Compiled from another working directory: the headers are found all the same.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path("/");
  const auto first = build_once(desc, tmp.path() / "cache");
  const auto again = build_once(desc, tmp.path() / "cache");
  EXPECT_EQ(first, again);  // a cache hit: the same image
  // An edit to a header (one level down, through include_dirs) is a new key, hence a new image.
  test::write_file(tmp.path() / "inc/common/scale.h", "#define SCALE 3.0f\n");
  const auto edited = build_once(desc, tmp.path() / "cache");
  EXPECT_NE(first, edited);
  test::write_file(tmp.path() / "src/helper.h", "#define HELPER_VALUE 4.0f\n");
  EXPECT_NE(build_once(desc, tmp.path() / "cache"), edited);
  std::filesystem::current_path(cwd);
}

TEST(include_headers, collect_headers_follows_nested_quoted_includes_and_skips_system_ones) {
  test::temp_dir tmp;
  test::write_file(tmp.path() / "a/x.h", "#pragma once\n#include \"y.h\"\n#include <cuda_fp16.h>\n");
  test::write_file(tmp.path() / "a/y.h", "#pragma once\n#include \"x.h\"\nint y;\n");
  const auto h = collect_headers("#include \"a/x.h\"\n  # include <a/y.h>\n", tmp.path(), {tmp.path()});
  ASSERT_EQ(h.count("a/x.h"), 1u);
  EXPECT_EQ(h.count("y.h"), 1u);  // relative to a/x.h
  EXPECT_EQ(h.count("x.h"), 1u);  // y.h includes x.h beside it
  EXPECT_EQ(h.count("cuda_fp16.h"), 0u);
  EXPECT_EQ(h.at("y.h"), "#pragma once\n#include \"x.h\"\nint y;\n");
}

TEST(include_headers, an_include_folder_that_does_not_exist_is_a_config_error) {
  test::temp_dir tmp;
  test::write_file(tmp.path() / "src/fill.cu", kernel_source);
  std::string d = description;
  d.replace(d.find("[inc]"), 5, "[nowhere]");
  const auto desc = test::write_file(tmp.path() / "kernel.yaml", d);
  try {
    (void)load_kernel_spec(desc.string());
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("include_dirs[0]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kf
