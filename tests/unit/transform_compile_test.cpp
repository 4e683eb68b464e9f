// NVRTC compile tests of the transformation operators (sm_90, no GPU needed): for every operator and every
// value of its parameter, the transformed source of a small realistic kernel (tests/unit/golden/transforms)
// compiles, and where the artefact shows the effect its static metrics agree (launch bounds, register
// caps, the shared memory of staged tiles and pipeline stages). A composition test loads a kernel
// description with a `transforms:` list and renders seeded random configurations of its space as the
// evaluator does (render_variant): each valid one compiles, the invalid compositions are kf::errors.
// Compilations run on two threads; the whole file takes a few seconds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "kforge/evaluators/compile.hpp"
#include "kforge/error.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "kforge/random.hpp"
#include "kforge/transform.hpp"
#include "support/test_support.hpp"
#include "support/transform_fixtures.hpp"

namespace kf {
namespace {

using test::context;
using test::input;
using test::make;

/// A compilation and what its result must satisfy.
struct job {
  std::string what;
  compile_request request;
  std::function<void(const compile_result&, const std::string&)> check;
};

/// Compiles every job on two threads (kf::compiler is thread-safe), then checks the results in order.
void compile_all(std::vector<job>& jobs) {
  const compiler nvrtc;
  std::vector<compile_result> results(jobs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++)
      results[i] = nvrtc.compile(jobs[i].request);
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread other(worker);
  worker();
  other.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  " << jobs.size() << " NVRTC compilations (sm_90) in " << secs << " s\n";
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& r = results[i];
    EXPECT_TRUE(r.ok) << jobs[i].what << "\n" << r.log << "\n--- source ---\n" << jobs[i].request.source;
    if (!r.ok) continue;
    ASSERT_EQ(r.kernels.size(), 1u) << jobs[i].what;
    if (jobs[i].check) jobs[i].check(r, jobs[i].what);
  }
}

/// One job: `t` applied to `file` with parameter values `v`.
job transformed(const std::string& what, const std::string& file, const transform& t,
                const transform_values& v, const transform_context& ctx,
                std::function<void(const compile_result&, const std::string&)> check = {}) {
  const auto src = input(file);
  const auto r = t.apply(src, v, ctx);
  EXPECT_TRUE(r.ok()) << what << ": " << r.error;
  job j;
  j.what = what;
  j.request.source = r.source;
  j.request.name = file;
  j.request.name_expressions = {ctx.entry};
  j.request.options = r.options;
  j.request.arch = "sm_90";
  j.check = std::move(check);
  return j;
}

/// Jobs for every value of the single parameter "value" of `t`.
void every_value(
    std::vector<job>& jobs, const std::string& type, const std::string& file, const transform& t,
    const transform_context& ctx,
    const std::function<void(const value&, const compile_result&, const std::string&)>& check = {}) {
  const auto ps = t.parameters();
  ASSERT_EQ(ps.size(), 1u);
  for (const auto& v : ps[0].values) {
    std::function<void(const compile_result&, const std::string&)> c;
    if (check) c = [check, v](const compile_result& r, const std::string& w) { check(v, r, w); };
    jobs.push_back(
        transformed(type + "=" + v.repr() + " on " + file, file, t, {{"value", v}}, ctx, std::move(c)));
  }
}

TEST(transform_compile, every_operator_and_value_compiles_for_sm_90) {
  std::vector<job> jobs;
  const auto rowsum = context("rowsum", {"a", "out"}, {"a"});
  const auto matmul = context("matmul", {"A", "B", "C"}, {"A", "B"});
  every_value(jobs, "unroll", "rowsum.cu", make("unroll", "cols", {{"factors", {0, 1, 2, 4, 8, 32}}}),
              rowsum);
  every_value(jobs, "unroll", "matmul_tiled.cu", make("unroll", "k_inner"), matmul);
  every_value(jobs, "vectorize", "saxpy_vec.cu", make("vectorize", "gs"),
              context("saxpy_gs", {"x", "y"}, {"x"}));
  every_value(jobs, "vectorize", "saxpy_vec.cu", make("vectorize", "chunk"),
              context("scale_chunk", {"x", "y"}, {"x"}));
  every_value(jobs, "coarsen", "saxpy_coarsen.cu", make("coarsen", "body"),
              context("saxpy", {"x", "y"}, {"x"}));
  every_value(
      jobs, "smem_tile", "transpose.cu", make("smem_tile", "tile"),
      context("transpose", {"in", "out"}, {"in"}),
      [](const value& v, const compile_result& r, const std::string& w) {
        const int expect = v == value("direct") ? 0 : v == value("shared_pad0") ? 32 * 32 * 4 : 32 * 33 * 4;
        EXPECT_EQ(r.kernels[0].metrics.shared_static_bytes, expect) << w;
      });
  every_value(jobs, "pipeline", "matmul_tiled.cu", make("pipeline", "k_tiles", {{"stages", {1, 2, 3, 4}}}),
              matmul, [](const value& v, const compile_result& r, const std::string& w) {
                EXPECT_EQ(r.kernels[0].metrics.shared_static_bytes, v.as_int() * 2 * 16 * 16 * 4) << w;
              });
  every_value(jobs, "read_only", "matmul_tiled.cu", make("read_only"), matmul);
  every_value(jobs, "read_only", "saxpy_vec.cu", make("read_only"), context("saxpy_gs", {"x", "y"}, {"x"}));
  every_value(jobs, "launch_bounds", "rowsum.cu", make("launch_bounds", "", {{"max_threads", "2 * 128"}}),
              rowsum, [](const value& v, const compile_result& r, const std::string& w) {
                EXPECT_EQ(r.kernels[0].metrics.max_threads_per_block, v.as_int() == 0 ? 0 : 256) << w;
              });
  every_value(jobs, "register_cap", "matmul_tiled.cu",
              make("register_cap", "", {{"max_registers", {0, 24, 32, 64}}}), matmul,
              [](const value& v, const compile_result& r, const std::string& w) {
                if (v.as_int() > 0) {
                  EXPECT_LE(r.kernels[0].metrics.registers, v.as_int()) << w;
                }
              });
  every_value(jobs, "tensor_core", "gemm_mma.cu", make("tensor_core", "mma_k"),
              context("gemm16x8", {"A", "B", "C"}, {"A", "B"}));
  // compiler_flags: each flag alone, every accepted ptxas option, and everything together.
  const std::vector<std::string> ptxas = {"default",
                                          "-O0",
                                          "-O1",
                                          "-O2",
                                          "-O3",
                                          "-dlcm=ca",
                                          "-dlcm=cg",
                                          "-dlcm=cs",
                                          "-dlcm=lu",
                                          "-dlcm=cv",
                                          "-dscm=wb",
                                          "-dscm=cg",
                                          "-dscm=cs",
                                          "-dscm=wt",
                                          "--allow-expensive-optimizations=true",
                                          "--allow-expensive-optimizations=false",
                                          "-O1 -dlcm=ca"};
  const auto flags = make("compiler_flags", "", {{"extra_vectorization", true}, {"ptxas", ptxas}});
  for (const auto& p : ptxas)
    jobs.push_back(transformed("compiler_flags ptxas=" + p, "rowsum.cu", flags,
                               {{"fast_math", false}, {"extra_vectorization", false}, {"ptxas", value(p)}},
                               rowsum));
  jobs.push_back(transformed(
      "compiler_flags fast_math", "rowsum.cu", flags,
      {{"fast_math", true}, {"extra_vectorization", false}, {"ptxas", value("default")}}, rowsum));
  jobs.push_back(transformed("compiler_flags all", "rowsum.cu", flags,
                             {{"fast_math", true}, {"extra_vectorization", true}, {"ptxas", value("-O2")}},
                             rowsum));
  // Other element types of vectorize.
  for (const std::string type : {"int", "unsigned", "double"}) {
    const std::string ok_src =
        "extern \"C\" __global__ void k(int n, const " + type + "* x, " + type +
        "* y) {\n  const int e = n < 64 * (threadIdx.x + 1) ? n : 64 * (threadIdx.x + 1);\n"
        "  //@kf vectorize v\n  for (int i = threadIdx.x * 64; i < e; ++i) y[i] += x[i];\n}\n";
    const auto t = make("vectorize", "v",
                        {{"widths", type == "double" ? nlohmann::json{1, 2} : nlohmann::json{1, 2, 4}}});
    const auto params = t.parameters();
    for (const auto& w : params[0].values) {
      const auto r = t.apply(ok_src, {{"value", w}}, context("k", {"x", "y"}, {"x"}));
      ASSERT_TRUE(r.ok()) << r.error;
      job j;
      j.what = "vectorize " + type + " width " + w.repr();
      j.request.source = r.source;
      j.request.name = "k.cu";
      j.request.name_expressions = {"k"};
      jobs.push_back(std::move(j));
    }
  }
  compile_all(jobs);
}

// --- Composition through a kernel description --------------------------------------------------------------

const char* poly_yaml = R"yaml(name: poly
source: poly.cu
entry: poly
parameters:
  - {name: block_size, values: [64, 128, 256], default: 256}
transforms:
  - {type: read_only}
  - {type: coarsen, site: body}
  - {type: vectorize, site: elems}
  - {type: unroll, site: horner, params: {factors: [0, 1, 4]}}
  - {type: launch_bounds, params: {max_threads: block_size, min_blocks: [0, 2]}}
  - {type: register_cap, params: {max_registers: [0, 64]}}
  - {type: compiler_flags, params: {ptxas: [default, "-O1"]}}
arguments:
  - {name: n, scalar: i64, value: n}
  - {name: degree, scalar: i32, value: 4}
  - {name: c, buffer: f32, size: 5}
  - {name: x, buffer: f32, size: n}
  - {name: y, buffer: f32, size: n, role: out}
grid: ["(n + block_size * 16 * coarsen_body - 1) // (block_size * 16 * coarsen_body)"]
block: [block_size]
shapes:
  time: [{n: 1000003}]
)yaml";

TEST(transform_compile, composed_transforms_of_a_kernel_description_render_and_compile) {
  register_builtins();
  test::temp_dir dir;
  test::write_file(dir.path() / "poly.cu", input("poly.cu"));
  const auto yaml = test::write_file(dir.path() / "kernel.yaml", poly_yaml);
  const auto k = load_kernel_spec(yaml.string());
  // The instances' parameters follow the kernel's own, named after the instances.
  std::vector<std::string> names;
  for (const auto& p : k.space.params())
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"block_size", "read_only", "coarsen_body", "vectorize_elems",
                                             "unroll_horner", "launch_bounds", "register_cap",
                                             "compiler_flags_fast_math", "compiler_flags_ptxas"}));
  EXPECT_EQ(k.own_params, 1u);
  ASSERT_EQ(k.transforms.size(), 7u);
  // The default configuration renders the source unchanged (only the kernel's own #defines in front).
  const auto def = render_variant(k, k.defaults);
  EXPECT_EQ(def.source, with_defines(k, k.defaults, k.source, k.source_file));
  EXPECT_EQ(def.options, std::vector<std::string>{});
  auto with = [&](std::map<std::string, value, std::less<>> vals) {
    auto c = k.defaults;
    for (const auto& [n, v] : vals) {
      const auto i = *k.space.param_index(n);
      c[i] = *k.space.value_index(i, v);
    }
    return c;
  };
  // The grid expression reads the coarsening factor.
  EXPECT_EQ(resolve_launch(k, with({{"coarsen_body", 4}, {"block_size", 128}}), k.time_shapes[0]).grid[0],
            (1000003u + 128 * 16 * 4 - 1) / (128 * 16 * 4));

  // Seeded random configurations, plus the corners: every valid one compiles; read_only=ldg before
  // vectorize>1 is an incompatible composition (the vectorizer finds __ldg(&x[i]), not x[i]).
  rng r(20261202);
  std::vector<config> configs{k.defaults};
  configs.push_back(with({{"read_only", "ldg"}, {"vectorize_elems", 4}}));
  configs.push_back(with({{"read_only", "restrict"},
                          {"coarsen_body", 8},
                          {"vectorize_elems", 4},
                          {"unroll_horner", 4},
                          {"launch_bounds", 2},
                          {"register_cap", 64},
                          {"compiler_flags_fast_math", true},
                          {"compiler_flags_ptxas", "-O1"}}));
  configs.push_back(with({{"read_only", "ldg"}, {"coarsen_body", 2}, {"unroll_horner", 1}}));
  for (int i = 0; i < 24; ++i)
    configs.push_back(k.space.sample(r));
  std::vector<job> jobs;
  int invalid = 0;
  for (const auto& c : configs) {
    const auto& ro = k.space.value_of(c, 1);
    const auto width = k.space.value_of(c, 3).as_int();
    const bool expect_invalid = ro == value("ldg") && width > 1;
    try {
      const auto v = render_variant(k, c);
      EXPECT_FALSE(expect_invalid) << k.space.describe(c) << " rendered";
      job j;
      j.what = k.space.describe(c);
      j.request.source = v.source;
      j.request.name = "poly.cu";
      j.request.name_expressions = {v.entry};
      j.request.options = v.options;
      const auto block = k.space.value_of(c, 0).as_int();
      j.check = [block](const compile_result& res, const std::string& w) {
        // The source's own __launch_bounds__(block_size), or the instance's with the same max_threads.
        EXPECT_EQ(res.kernels[0].metrics.max_threads_per_block, block) << w;
      };
      jobs.push_back(std::move(j));
    } catch (const error& e) {
      ++invalid;
      EXPECT_TRUE(expect_invalid) << k.space.describe(c) << ": " << e.what();
      EXPECT_NE(
          std::string(e.what()).find("transform vectorize_elems does not apply: vectorize at site 'elems'"),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_GE(invalid, 1);
  EXPECT_GE(jobs.size(), 14u);
  compile_all(jobs);
}

TEST(transform_compile, a_site_missing_from_the_source_is_an_invalid_variant_not_a_crash) {
  register_builtins();
  test::temp_dir dir;
  test::write_file(dir.path() / "poly.cu", input("poly.cu"));
  std::string yaml = poly_yaml;
  const std::string first = "  - {type: read_only}\n";
  yaml.replace(yaml.find(first), first.size(), "  - {type: unroll, site: nowhere}\n" + first);
  const auto k = load_kernel_spec(test::write_file(dir.path() / "kernel.yaml", yaml).string());
  rng r(7);
  for (int i = 0; i < 5; ++i) {
    const auto c = i == 0 ? k.defaults : k.space.sample(r);
    try {
      render_variant(k, c);
      ADD_FAILURE() << "rendered " << k.space.describe(c);
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "transform unroll_nowhere does not apply: unroll at site 'nowhere': the site "
                    "is missing from the source"),
                std::string::npos)
          << e.what();
    }
  }
  // A bad instance is a config error when the description is loaded.
  const std::string nowhere = "{type: unroll, site: nowhere}";
  yaml.replace(yaml.find(nowhere), nowhere.size(), "{type: unroll, site: horner, params: {factors: [2]}}");
  try {
    load_kernel_spec(test::write_file(dir.path() / "bad.yaml", yaml).string());
    ADD_FAILURE() << "loaded";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("must include 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kf
