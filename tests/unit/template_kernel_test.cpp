// Template kernels as a search space (issue 17 item 2) without a GPU: experiments/kernels/gemm_bf16_cute,
// a CuTe kernel template instantiated through NVRTC name expressions, and the description key
// include_packages that finds the CUTLASS and CUDA headers at run time. The header packages are part of
// the compile cache key through their contents (every header the source reaches), so a package upgrade
// cannot serve a stale CUBIN.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluators/cuda/nvrtc/compile_cache.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/evaluators/cuda.hpp"
#include "kforge/kforge.hpp"
#include "kforge/random.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

/// Sets an environment variable for the scope (unset: nullopt), restoring the old value after.
class scoped_env {
 public:
  scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const char* description = R"YAML(
name: pkg
source: pkg.cu
entry: "pkg<{n}>"
injection: template
include_packages: [cutlass]
parameters:
  - {name: n, values: [1, 2]}
arguments:
  - {name: x, buffer: f32, size: 64, role: out}
grid: ["1"]
block: ["64"]
shapes:
  time: [{m: 1}]
reference: baseline
)YAML";

const char* source = R"CUDA(
#include <cute/tensor.hpp>
template <int N> __global__ void pkg(float* x) { x[threadIdx.x] = N * CUTE_FAKE; }
)CUDA";

/// A fake nvidia-cutlass installation under root/.venv and a description two folders below root.
fs::path fake_repo(const fs::path& root) {
  const auto inc = root / ".venv/lib/python3.11/site-packages/cutlass_library/source/include";
  test::write_file(inc / "cute/tensor.hpp", "#include \"cute/config.hpp\"\n");
  test::write_file(inc / "cute/config.hpp", "#define CUTE_FAKE 1.0f  // version 1\n");
  test::write_file(root / "experiments/pkg/pkg.cu", source);
  return test::write_file(root / "experiments/pkg/kernel.yaml", description);
}

TEST(include_packages, cutlass_is_found_in_the_venv_above_the_description) {
  test::temp_dir dir;
  const auto yaml = fake_repo(dir.path());
  scoped_env env("KFORGE_CUTLASS_INCLUDE", std::nullopt);
  const auto k = load_kernel_spec(yaml.string());
  const auto want = dir.path() / ".venv/lib/python3.11/site-packages/cutlass_library/source/include";
  ASSERT_EQ(k.include_dirs.size(), 2u);  // the source's folder, then the package
  EXPECT_EQ(fs::weakly_canonical(k.include_dirs[1]), fs::weakly_canonical(want));
  const auto v = render_variant(k, k.defaults);
  EXPECT_EQ(v.entry, "pkg<1>");
  const auto req = variant_compile_request(k, v, k.source_file, "sm_90");
  EXPECT_EQ(req.headers.count("cute/tensor.hpp"), 1u);
  EXPECT_EQ(req.headers.count("cute/config.hpp"), 1u);  // reached through tensor.hpp
}

TEST(include_packages, the_environment_variable_overrides_and_misuse_names_the_key) {
  test::temp_dir dir;
  const auto yaml = fake_repo(dir.path());
  const auto other = dir.path() / "other-include";
  test::write_file(other / "cute/tensor.hpp", "#define CUTE_FAKE 2.0f\n");
  {
    scoped_env env("KFORGE_CUTLASS_INCLUDE", other.string());
    const auto k = load_kernel_spec(yaml.string());
    ASSERT_EQ(k.include_dirs.size(), 2u);
    EXPECT_EQ(k.include_dirs[1], other);
  }
  {
    scoped_env env("KFORGE_CUTLASS_INCLUDE", (dir.path() / "empty").string());
    try {
      load_kernel_spec(yaml.string());
      ADD_FAILURE() << "a KFORGE_CUTLASS_INCLUDE without cute/tensor.hpp was accepted";
    } catch (const error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("include_packages[0]"), std::string::npos) << what;
      EXPECT_NE(what.find("KFORGE_CUTLASS_INCLUDE"), std::string::npos) << what;
      EXPECT_NE(what.find("kernel.yaml"), std::string::npos) << what;
    }
  }
  {
    std::string text = description;
    text.replace(text.find("[cutlass]"), 9, "[boost]");
    test::write_file(yaml, text);
    scoped_env env("KFORGE_CUTLASS_INCLUDE", std::nullopt);
    try {
      load_kernel_spec(yaml.string());
      ADD_FAILURE() << "an unknown header package was accepted";
    } catch (const error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("include_packages[0]"), std::string::npos) << what;
      EXPECT_NE(what.find("expected cutlass or cuda"), std::string::npos) << what;
    }
  }
}

TEST(include_packages, a_header_upgrade_changes_the_compile_cache_key) {
  test::temp_dir dir;
  const auto yaml = fake_repo(dir.path());
  scoped_env env("KFORGE_CUTLASS_INCLUDE", std::nullopt);
  auto key_now = [&] {
    const auto k = load_kernel_spec(yaml.string());
    return cuda::detail::compile_cache_key(
        variant_compile_request(k, render_variant(k, k.defaults), k.source_file, "sm_90"), "13.0");
  };
  const auto before = key_now();
  EXPECT_EQ(key_now(), before);
  // A header the source reaches only through another one: the package's new version.
  test::write_file(
      dir.path() / ".venv/lib/python3.11/site-packages/cutlass_library/source/include/cute/config.hpp",
      "#define CUTE_FAKE 1.0f  // version 2\n");
  EXPECT_NE(key_now(), before);
}

// gemm_bf16_cute's description; its load fails (kf::error, which fails the test) where the CUTLASS headers
// are missing, with where they come from.
kernel_spec cute_kernel() {
  try {
    return test::load_suite_kernel("gemm_bf16_cute");
  } catch (const error& e) {
    throw error(std::string(e.what()) +
                "\n(the CUTLASS headers come from scripts/install-deps, or set KFORGE_CUTLASS_INCLUDE)");
  }
}

// The rendered variant of a template kernel is the source unchanged plus its name expression.
TEST(gemm_bf16_cute, renders_the_source_unchanged_and_the_template_arguments_into_the_entry) {
  const auto k = cute_kernel();
  const auto v = render_variant(k, k.defaults);
  EXPECT_EQ(v.source, k.source);
  EXPECT_EQ(v.entry, "gemm_bf16_cute<128, 128, 64, 1, 1, 4, 1>");
  std::map<std::string, value, std::less<>> values;
  for (const auto& [name, x] : std::vector<std::pair<std::string, std::int64_t>>{{"tile_m", 64},
                                                                                 {"tile_n", 256},
                                                                                 {"tile_k", 32},
                                                                                 {"cluster_m", 2},
                                                                                 {"cluster_n", 1},
                                                                                 {"stages", 3},
                                                                                 {"schedule", 0}})
    values.emplace(name, value(x));
  const auto c = k.space.from_values(values);
  EXPECT_EQ(render_variant(k, c).entry, "gemm_bf16_cute<64, 256, 32, 2, 1, 3, 0>");
  const auto req = variant_compile_request(k, render_variant(k, c), k.source_file, "sm_90");
  EXPECT_EQ(req.arch, "sm_90a");
  EXPECT_EQ(req.headers.count("cute/tensor.hpp"), 1u);
  EXPECT_EQ(req.headers.count("cuda/std/cstdint"), 1u);  // the toolkit's CCCL, through include_packages: cuda
}

// Every configuration of gemm_bf16_cute is too many to compile here (hundreds; each CuTe instantiation
// takes 10-70 s of NVRTC on a 2-core machine): a seeded sample of 4 valid configurations besides the
// default (seed 1702: the same sample on every run), besides the kernel_suite test's baseline and 2.
TEST(gemm_bf16_cute, a_seeded_sample_compiles_for_sm_90a_without_spills_and_fits_an_h200) {
  const auto k = cute_kernel();
  ASSERT_EQ(k.injection, "template");
  rng r(1702);
  std::vector<config> configs{k.defaults};
  for (int i = 0; i < 4; ++i)
    configs.push_back(k.space.sample(r));
  test::temp_dir cache;
  compiler c(cache.path() / "nvrtc");
  compile_pool pool(c, 2, 8);  // max_in_flight above the 5 requests: all are submitted before any is taken
  std::vector<compile_pool::ticket> tickets;
  std::vector<compile_request> requests;
  for (const auto& cfg : configs) {
    requests.push_back(variant_compile_request(k, render_variant(k, cfg), k.source_file, "sm_90"));
    tickets.push_back(pool.submit(requests.back()));
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto what = k.space.describe(configs[i]) + " (" + requests[i].name_expressions[0] + ")";
    const auto res = pool.take(tickets[i]);
    ASSERT_TRUE(res.ok) << what << " does not compile:\n" << res.log.substr(0, 4000);
    EXPECT_EQ(requests[i].arch, "sm_90a");
    ASSERT_EQ(res.kernels.size(), 1u);
    const auto& m = res.kernels[0].metrics;
    EXPECT_NE(res.kernels[0].lowered_name.find("gemm_bf16_cute"), std::string::npos) << what;
    EXPECT_EQ(m.spill_stores_bytes + m.spill_loads_bytes, 0) << what;
    // C7515: ptxas serialised the wgmma instructions (a slow variant of the tensor-core path). Known for
    // tile_n 256 (128 accumulator registers per thread; README.md): reported, not failed. Elsewhere a
    // regression.
    const bool serialised = res.log.find("C7515") != std::string::npos;
    if (k.space.value_of(configs[i], *k.space.param_index("tile_n")).as_int() == 256) {
      if (serialised) std::cout << "  note: " << what << ": wgmma serialised (C7515)\n";
    } else {
      EXPECT_FALSE(serialised) << what << ":\n" << res.log;
    }
    const auto plan = resolve_launch(k, configs[i], k.time_shapes.front());
    const auto occ =
        theoretical_occupancy(m, static_cast<int>(plan.threads()), static_cast<int>(plan.shared_bytes));
    EXPECT_GE(occ.blocks_per_sm, 1) << what << ": limited by " << occ.limited_by;
    std::cout << "  " << what << ": " << res.seconds << " s NVRTC, " << m.registers << " registers, "
              << res.cubin.size() << " bytes of CUBIN\n";
  }
}

}  // namespace
}  // namespace kf
