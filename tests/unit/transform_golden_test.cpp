// Golden tests of the source-to-source transformation operators (transforms/, docs/transforms.md) on
// source text: every operator's default value leaves the source unchanged, every other value gives exactly
// the expected text (inline below, or tests/unit/golden/transforms/*.expected.cu for the long rewrites),
// unsupported forms and conflicts give errors naming the operator and the site, and annotations parse as
// documented. The inputs are the kernels in tests/unit/golden/transforms/*.cu (the NVRTC compile test,
// transform_compile_test.cpp, compiles the same rewrites).
//
// Regenerating the expected files after an intended change: KFORGE_UPDATE_GOLDEN=1 kforge_unit_tests
// --gtest_filter='transform_golden*' rewrites them; review the diff before committing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "kforge/error.hpp"
#include "kforge/kforge.hpp"
#include "kforge/transform.hpp"
#include "support/test_support.hpp"
#include "support/transform_fixtures.hpp"

namespace kf {
namespace {

using test::context;
using test::golden_dir;
using test::input;
using test::make;
using test::read_text;

/// Compares `actual` with the expected file `name` (or rewrites it under KFORGE_UPDATE_GOLDEN=1).
void expect_golden(const std::string& actual, const std::string& name) {
  const auto path = golden_dir() / name;
  if (const char* u = std::getenv("KFORGE_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    test::write_file(path, actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing (KFORGE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(actual, read_text(path)) << "differs from " << name;
}

/// The transform's result for one value of its parameter "value".
transform_result run(const transform& t, const std::string& src, const value& v,
                     const transform_context& ctx = {}) {
  return t.apply(src, {{"value", v}}, ctx);
}

/// The rewritten source (the test fails when the transform does not apply).
std::string ok(const transform_result& r) {
  EXPECT_TRUE(r.ok()) << r.error;
  return r.source;
}

/// The error (the test fails when the transform applies), checked to name the operator and the site.
std::string err(const transform_result& r, const std::string& op, const std::string& site) {
  EXPECT_FALSE(r.ok()) << "applied, giving:\n" << r.source;
  const std::string prefix = site.empty() ? op + ": " : op + " at site '" + site + "': ";
  EXPECT_EQ(r.error.rfind(prefix, 0), 0u) << r.error;
  return r.error;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The contexts of the input kernels (buffers in parameter order; the read-only ones have role in).
const transform_context rowsum_ctx = context("rowsum", {"a", "out"}, {"a"});
const transform_context gs_ctx = context("saxpy_gs", {"x", "y"}, {"x"});
const transform_context chunk_ctx = context("scale_chunk", {"x", "y"}, {"x"});
const transform_context saxpy_ctx = context("saxpy", {"x", "y"}, {"x"});
const transform_context transpose_ctx = context("transpose", {"in", "out"}, {"in"});
const transform_context matmul_ctx = context("matmul", {"A", "B", "C"}, {"A", "B"});
const transform_context gemm_ctx = context("gemm16x8", {"A", "B", "C"}, {"A", "B"});

// --- Registry and parameters -------------------------------------------------------------------------------

TEST(transform_golden, every_operator_is_registered_with_documented_options) {
  register_builtins();
  const std::vector<std::string> ops = {"coarsen",   "compiler_flags", "launch_bounds", "pipeline",
                                        "read_only", "register_cap",   "smem_tile",     "tensor_core",
                                        "unroll",    "vectorize"};
  for (const auto& op : ops) {
    ASSERT_TRUE(transform_registry().contains(op)) << op;
    const auto e = transform_registry().get(op);
    EXPECT_FALSE(e.summary.empty()) << op;
    for (const auto& o : e.options)
      EXPECT_FALSE(o.doc.empty()) << op << "." << o.name;
  }
}

TEST(transform_golden, parameters_have_neutral_defaults_among_their_values) {
  struct expect_params {
    std::string type, site;
    nlohmann::json params;
    std::vector<std::string> names;
    std::vector<value> defaults;
  };
  const std::vector<expect_params> cases = {
      {"unroll", "s", nlohmann::json::object(), {"value"}, {0}},
      {"vectorize", "s", nlohmann::json::object(), {"value"}, {1}},
      {"coarsen", "s", nlohmann::json::object(), {"value"}, {1}},
      {"smem_tile", "s", nlohmann::json::object(), {"value"}, {"direct"}},
      {"pipeline", "s", nlohmann::json::object(), {"value"}, {1}},
      {"read_only", "", nlohmann::json::object(), {"value"}, {"none"}},
      {"launch_bounds", "", nlohmann::json::object(), {"value"}, {0}},
      {"register_cap", "", nlohmann::json::object(), {"value"}, {0}},
      {"compiler_flags", "", nlohmann::json::object(), {"fast_math", "ptxas"}, {false, "default"}},
      {"compiler_flags",
       "",
       {{"extra_vectorization", true}, {"fast_math", false}, {"ptxas", {"default"}}},
       {"extra_vectorization"},
       {false}},
      {"tensor_core", "s", nlohmann::json::object(), {"value"}, {"scalar"}},
  };
  for (const auto& c : cases) {
    const auto ps = make(c.type, c.site, c.params).parameters();
    ASSERT_EQ(ps.size(), c.names.size()) << c.type;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      EXPECT_EQ(ps[i].name, c.names[i]) << c.type;
      EXPECT_EQ(ps[i].default_value, c.defaults[i]) << c.type << " " << ps[i].name;
      EXPECT_NE(std::find(ps[i].values.begin(), ps[i].values.end(), ps[i].default_value), ps[i].values.end())
          << c.type << " " << ps[i].name;
    }
  }
  // Values come from the options.
  const auto u = make("unroll", "s", {{"factors", {0, 3, 16}}}).parameters();
  EXPECT_EQ(u[0].values, (std::vector<value>{0, 3, 16}));
  const auto s = make("smem_tile", "s", {{"pads", {1, 2}}}).parameters();
  EXPECT_EQ(s[0].values, (std::vector<value>{"direct", "shared_pad1", "shared_pad2"}));
  EXPECT_EQ(make("compiler_flags", "", {{"fast_math", false}, {"ptxas", {"default"}}}).parameters().size(),
            0u);
}

TEST(transform_golden, bad_options_are_config_errors) {
  auto fails = [](const std::string& type, const std::string& site, const nlohmann::json& params,
                  const std::string& part) {
    try {
      make(type, site, params);
      ADD_FAILURE() << type << " accepted " << params.dump();
    } catch (const config_error& e) {
      EXPECT_TRUE(contains(e.what(), part)) << e.what();
    }
  };
  fails("unroll", "", nlohmann::json::object(), "site");
  fails("unroll", "k loop", nlohmann::json::object(), "not a name");
  fails("unroll", "s", {{"factors", {1, 2}}}, "must include 0");
  fails("unroll", "s", {{"factors", {0, 2, 2}}}, "twice");
  fails("unroll", "s", {{"factors", {0, -1}}}, "out of range");
  fails("unroll", "s", {{"factor", {0}}}, "factor");
  fails("vectorize", "s", {{"widths", {1, 3}}}, "3");
  fails("vectorize", "s", {{"widths", {2, 4}}}, "must include 1");
  fails("coarsen", "s", {{"factors", {2, 4}}}, "must include 1");
  fails("pipeline", "s", {{"stages", {1, 5}}}, "out of range");
  fails("read_only", "", {{"modes", {"restrict", "ldg"}}}, "must include none");
  fails("read_only", "", {{"modes", {"none", "const"}}}, "unknown mode");
  fails("read_only", "s", nlohmann::json::object(), "takes no site");
  fails("launch_bounds", "s", nlohmann::json::object(), "takes no site");
  fails("launch_bounds", "", {{"max_threads", "256; int x"}}, "max_threads");
  fails("launch_bounds", "", {{"min_blocks", {1, 2}}}, "must include 0");
  fails("register_cap", "", {{"max_registers", {0, 16}}}, "below 24");
  fails("compiler_flags", "", {{"ptxas", {"-O1", "default"}}}, "first entry must be 'default'");
  fails("compiler_flags", "", {{"ptxas", {"default", "-O1 --fancy"}}}, "unknown ptxas option '--fancy'");
  fails("tensor_core", "s", {{"choices", {"scalar", "m m a"}}}, "not a name");
}

// --- Defaults leave the source unchanged -------------------------------------------------------------------

TEST(transform_golden, every_default_leaves_the_source_unchanged) {
  struct one {
    std::string type, site, file;
    transform_context ctx;
  };
  const std::vector<one> cases = {
      {"unroll", "cols", "rowsum.cu", rowsum_ctx},
      {"vectorize", "gs", "saxpy_vec.cu", gs_ctx},
      {"vectorize", "chunk", "saxpy_vec.cu", chunk_ctx},
      {"coarsen", "body", "saxpy_coarsen.cu", saxpy_ctx},
      {"smem_tile", "tile", "transpose.cu", transpose_ctx},
      {"pipeline", "k_tiles", "matmul_tiled.cu", matmul_ctx},
      {"unroll", "k_inner", "matmul_tiled.cu", matmul_ctx},
      {"read_only", "", "matmul_tiled.cu", matmul_ctx},
      {"launch_bounds", "", "matmul_tiled.cu", matmul_ctx},
      {"register_cap", "", "rowsum.cu", rowsum_ctx},
      {"compiler_flags", "", "rowsum.cu", rowsum_ctx},
      {"tensor_core", "mma_k", "gemm_mma.cu", gemm_ctx},
  };
  for (const auto& c : cases) {
    const auto t = make(c.type, c.site);
    const auto src = input(c.file);
    transform_values defaults;
    for (const auto& p : t.parameters())
      defaults.emplace(p.name, p.default_value);
    const auto r = t.apply(src, defaults, c.ctx);
    ASSERT_TRUE(r.ok()) << c.type << ": " << r.error;
    EXPECT_EQ(r.source, src) << c.type << " at " << c.site;
    EXPECT_TRUE(r.options.empty()) << c.type;
  }
}

// --- unroll ------------------------------------------------------------------------------------------------

TEST(transform_golden, unroll_inserts_the_pragma) {
  const auto t = make("unroll", "cols");
  const auto src = input("rowsum.cu");
  const std::string loop = "  //@kf unroll cols\n  for (int j = 0; j < n; ++j) {\n";
  ASSERT_TRUE(contains(src, loop));
  auto expected = [&](const std::string& pragma) {
    std::string e = src;
    e.replace(e.find(loop), loop.size(),
              "  //@kf unroll cols\n  " + pragma + "\n  for (int j = 0; j < n; ++j) {\n");
    return e;
  };
  EXPECT_EQ(ok(run(t, src, 4, rowsum_ctx)), expected("#pragma unroll 4"));
  EXPECT_EQ(ok(run(t, src, 1, rowsum_ctx)), expected("#pragma unroll 1"));
  EXPECT_EQ(ok(run(t, src, 0, rowsum_ctx)), src);
}

TEST(transform_golden, unroll_applies_to_every_loop_of_its_site_and_refuses_bad_forms) {
  const auto t = make("unroll", "s");
  const std::string two =
      "void f(float* a) {\n\t//@kf unroll s\n\tfor (int i = 0; i < 4; ++i) a[i] = 0;\n    //@kf unroll s\n"
      "    //@kf vectorize other\n    for (;;) {}\n}\n";
  EXPECT_EQ(
      ok(run(t, two, 8)),
      "void f(float* a) {\n\t//@kf unroll s\n\t#pragma unroll 8\n\tfor (int i = 0; i < 4; ++i) a[i] = 0;\n"
      "    //@kf unroll s\n    //@kf vectorize other\n    #pragma unroll 8\n    for (;;) {}\n}\n");
  // Conflicts: the loop already carries a pragma (from the source or an earlier instance).
  const auto once = ok(run(t, two, 2));
  EXPECT_TRUE(contains(err(run(t, once, 4), "unroll", "s"), "already has a '#pragma unroll'"));
  EXPECT_EQ(ok(run(t, once, 0)), once);  // the default never conflicts
  // Not a loop.
  EXPECT_TRUE(contains(err(run(t, "//@kf unroll s\nint x = 0;\n", 2), "unroll", "s"), "expected a for loop"));
  EXPECT_TRUE(contains(err(run(t, "//@kf unroll s\n", 2), "unroll", "s"), "the end of the source"));
  EXPECT_TRUE(
      contains(err(run(t, "//@kf unroll s\nx = 1; for (;;) {}\n", 2), "unroll", "s"), "expected a for loop"));
  // Sites: missing, marked for another operator, arguments it does not take.
  EXPECT_TRUE(contains(err(run(t, "for (;;) {}\n", 2), "unroll", "s"), "missing from the source"));
  EXPECT_TRUE(
      contains(err(run(t, "//@kf vectorize s\nfor (;;) {}\n", 0), "unroll", "s"), "marked for 'vectorize'"));
  EXPECT_TRUE(contains(err(run(t, "//@kf unroll s factor=2\nfor (;;) {}\n", 2), "unroll", "s"),
                       "unknown annotation argument 'factor'"));
  // A value of the wrong kind is an error result, not an exception.
  EXPECT_TRUE(contains(err(t.apply(two, {{"value", value("4")}}, {}), "unroll", "s"), "not an integer"));
  EXPECT_TRUE(contains(err(t.apply(two, {}, {}), "unroll", "s"), "no value"));
}

TEST(transform_golden, two_operators_on_one_loop_conflict_in_either_order) {
  const auto u = make("unroll", "L");
  const auto v = make("vectorize", "L");
  const auto ctx = context("k", {"x", "y"}, {"x"});
  const std::string src =
      "extern \"C\" __global__ void k(int n, const float* x, float* y) {\n  //@kf unroll L\n  //@kf "
      "vectorize L\n"
      "  for (int i = 0; i < n; ++i) y[i] = x[i];\n}\n";
  // Either at its default is harmless.
  EXPECT_TRUE(run(v, ok(run(u, src, 0, ctx)), 4, ctx).ok());
  EXPECT_TRUE(run(u, ok(run(v, src, 1, ctx)), 4, ctx).ok());
  EXPECT_TRUE(
      contains(err(run(v, ok(run(u, src, 4, ctx)), 4, ctx), "vectorize", "L"), "found '#pragma unroll 4'"));
  EXPECT_TRUE(contains(err(run(u, ok(run(v, src, 4, ctx)), 4, ctx), "unroll", "L"), "expected a for loop"));
  // read_only's __ldg before vectorize: the loop no longer reads x[i].
  const auto ldg = ok(run(make("read_only"), src, "ldg", ctx));
  EXPECT_TRUE(contains(err(run(v, ldg, 2, ctx), "vectorize", "L"), "address"));
  // ... but after it, read_only rewrites only the scalar loops' reads.
  const auto vec_then_ldg = ok(run(make("read_only"), ok(run(v, src, 2, ctx)), "ldg", ctx));
  EXPECT_TRUE(contains(vec_then_ldg, "y[i] = __ldg(&x[i]);"));
  EXPECT_TRUE(contains(vec_then_ldg, "*reinterpret_cast<const float2*>(x + kf_L_i)"));
}

TEST(transform_golden, sources_the_lexer_cannot_read_are_errors) {
  const auto t = make("launch_bounds", "", {{"max_threads", "128"}});
  const auto ctx = context("k", {"y"}, {});
  EXPECT_TRUE(
      contains(err(run(t, "extern \"C\" __global__ void k(float* y) { y[0] = 0; /* open\n}\n", 2, ctx),
                   "launch_bounds", ""),
               "unterminated /* comment"));
  EXPECT_TRUE(contains(
      err(run(t, "extern \"C\" __global__ void k(float* y) { y[0] = 0; ]\n}\n", 2, ctx), "launch_bounds", ""),
      "unbalanced ']'"));
  EXPECT_TRUE(
      contains(err(run(t, "extern \"C\" __global__ void k(float* y) { const char* s = \"abc; }\n", 2, ctx),
                   "launch_bounds", ""),
               "unterminated literal"));
  // Raw strings, character literals and digit separators are read as single tokens.
  const std::string tricky =
      "const char* r = R\"x( } ) ]\" )x\";\nextern \"C\" __global__ void k(float* y) { y[0] = '}' + 1'000; "
      "}\n";
  EXPECT_TRUE(contains(ok(run(t, tricky, 2, ctx)), "__launch_bounds__(128, 2) k(float* y)"));
}

// --- vectorize ---------------------------------------------------------------------------------------------

TEST(transform_golden, vectorize_grid_stride_loop) {
  const auto src = input("saxpy_vec.cu");
  const auto t = make("vectorize", "gs");
  expect_golden(ok(run(t, src, 4, gs_ctx)), "saxpy_vec.gs4.expected.cu");
  expect_golden(ok(run(t, src, 2, gs_ctx)), "saxpy_vec.gs2.expected.cu");
}

TEST(transform_golden, vectorize_unit_stride_loop_with_a_statement_body) {
  const auto src = input("saxpy_vec.cu");
  const auto t = make("vectorize", "chunk");
  expect_golden(ok(run(t, src, 4, chunk_ctx)), "saxpy_vec.chunk4.expected.cu");
}

TEST(transform_golden, vectorize_refuses_loops_outside_its_form) {
  const auto t = make("vectorize", "v");
  const auto ctx = context("k", {"x", "y"}, {"x"});
  auto kernel = [](const std::string& ann, const std::string& loop) {
    return "extern \"C\" __global__ void k(int n, const float* x, float* y) {\n  //@kf vectorize v" + ann +
           "\n  " + loop + "\n}\n";
  };
  auto fails = [&](const std::string& ann, const std::string& loop, const std::string& part) {
    const auto e = err(run(t, kernel(ann, loop), 4, ctx), "vectorize", "v");
    EXPECT_TRUE(contains(e, part)) << loop << "\n" << e;
    // Width 1 only checks the annotation.
    EXPECT_TRUE(run(t, kernel(ann, loop), 1, ctx).ok() || contains(e, "annotation argument"));
  };
  fails("", "for (int i = 0; i <= n; ++i) y[i] = x[i];", "condition");
  fails("", "for (int i = 0; n > i; ++i) y[i] = x[i];", "condition");
  fails("", "for (int i = 0; i < n && x[i] > 0; ++i) y[i] = x[i];", "lower precedence");
  fails("", "for (int i = 0; i < n; i += 2) y[i] = x[i];", "needs base=");
  fails(" base=0", "for (int i = 0; i < n; ++i) y[i] = x[i];", "only for strided loops");
  fails("", "for (int i = 0; i < n; --i) y[i] = x[i];", "increment");
  fails("", "int i; for (i = 0; i < n; ++i) y[i] = x[i];", "expected a for loop");
  fails("", "for (i = 0; i < n; ++i) y[i] = x[i];", "declare its index");
  fails("", "for (int i = 0, j = 0; i < n; ++i) y[i] = x[j];", "more than one variable");
  fails(" arrays=x,y", "for (int i = 0; i < n; ++i) y[i] = x[i + 1];", "used other than as x[i]");
  fails(" arrays=x,y", "for (int i = 0; i < n; ++i) { float* p = y; p[i] = x[i]; }",
        "used other than as y[i]");
  fails("", "for (int i = 0; i < n; ++i) { if (x[i] < 0) break; y[i] = x[i]; }", "'break'");
  fails("", "for (int i = 0; i < n; ++i) { y[i] = x[i]; i += 1; }", "modifies the index");
  fails("", "for (int i = 0; i < n; ++i) { y[i] = x[i]; n = 0; }", "modifies 'n'");
  fails("", "for (int i = 0; i < n; ++i) if (x[i] > 0) y[i] = x[i];", "in braces");
  fails(" index=j", "for (int i = 0; i < n; ++i) y[i] = x[i];", "index=j");
  fails(" arrays=x,z", "for (int i = 0; i < n; ++i) y[i] = x[i];", "element type of 'z'");
  fails(" arrays=x type=half", "for (int i = 0; i < n; ++i) y[i] = x[i];", "'half' are not supported");
  fails(" base=0", "for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * threadIdx.x;",
        "uses threadIdx");
  fails(" arrays=x", "for (int i = 0; i < n; ++i) { float* p = &x[i]; y[i] = *p; }", "address");
  fails(" bogus=1", "for (int i = 0; i < n; ++i) y[i] = x[i];", "unknown annotation argument 'bogus'");
  fails("", "for (int i = n--; i < n; ++i) y[i] = x[i];", "side effects");
  // A second vectorize instance at the same site finds the rewritten block, not a loop: a conflict.
  const auto once = ok(run(t, kernel("", "for (int i = 0; i < n; ++i) y[i] = x[i];"), 2, ctx));
  EXPECT_TRUE(contains(err(run(t, once, 4, ctx), "vectorize", "v"), "expected a for loop"));
  // double: width 2 only.
  const std::string dbl =
      "extern \"C\" __global__ void k(int n, const double* x, double* y) {\n  //@kf vectorize v\n"
      "  for (int i = 0; i < n; ++i) y[i] = x[i];\n}\n";
  EXPECT_TRUE(contains(ok(run(t, dbl, 2, ctx)), "double2"));
  EXPECT_TRUE(contains(err(run(t, dbl, 4, ctx), "vectorize", "v"), "width 2 only"));
}

TEST(transform_golden, vectorize_loads_written_arrays_that_are_read_or_conditionally_written) {
  const auto t = make("vectorize", "v");
  const auto ctx = context("k", {"x", "y"}, {"x"});
  const std::string cond =
      "extern \"C\" __global__ void k(int n, const float* x, float* y) {\n  //@kf vectorize v\n"
      "  for (int i = 0; i < n; ++i) {\n    if (x[i] > 0) y[i] = x[i];\n  }\n}\n";
  const auto out = ok(run(t, cond, 4, ctx));
  EXPECT_TRUE(contains(out, "float4 kf_v_y = *reinterpret_cast<const float4*>(y + kf_v_i);")) << out;
  EXPECT_TRUE(contains(out, "*reinterpret_cast<float4*>(y + kf_v_i) = kf_v_y;")) << out;
  const std::string plain =
      "extern \"C\" __global__ void k(int n, const float* x, float* y) {\n  //@kf vectorize v\n"
      "  for (int i = 0; i < n; ++i) {\n    y[i] = 2.0f * x[i];\n  }\n}\n";
  const auto out2 = ok(run(t, plain, 4, ctx));
  EXPECT_TRUE(contains(out2, "      float4 kf_v_y;\n")) << out2;
  EXPECT_FALSE(contains(out2, "reinterpret_cast<const float4*>(y")) << out2;
  // Lanes in order, i replaced by (g + lane) where it is not an index of a marked array.
  const std::string uses_i =
      "extern \"C\" __global__ void k(int n, const float* x, float* y, float* z) {\n  //@kf vectorize v "
      "arrays=x,y\n"
      "  for (int i = 0; i < n; ++i) {\n    y[i] = x[i] * i + z[i];\n  }\n}\n";
  const auto out3 = ok(run(t, uses_i, 2, context("k", {"x", "y", "z"}, {"x", "z"})));
  EXPECT_TRUE(contains(out3,
                       "{\n          kf_v_y.x = kf_v_x.x * (kf_v_i + 0) + z[(kf_v_i + 0)];\n        }\n"
                       "        {\n          kf_v_y.y = kf_v_x.y * (kf_v_i + 1) + z[(kf_v_i + 1)];\n"))
      << out3;
}

// --- coarsen -----------------------------------------------------------------------------------------------

TEST(transform_golden, coarsen_repeats_the_block_as_consecutive_blocks) {
  const auto src = input("saxpy_coarsen.cu");
  const auto t = make("coarsen", "body");
  const std::string block =
      "  {\n"
      "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i < n) y[i] = a * x[i] + y[i];\n"
      "  }";
  ASSERT_TRUE(contains(src, block));
  std::string expected = src;
  expected.replace(expected.find(block), block.size(),
                   "  {\n"
                   "    const long long i = (long long)(blockIdx.x * 2u + 0u) * blockDim.x + threadIdx.x;\n"
                   "    if (i < n) y[i] = a * x[i] + y[i];\n"
                   "  }\n"
                   "  {\n"
                   "    const long long i = (long long)(blockIdx.x * 2u + 1u) * blockDim.x + threadIdx.x;\n"
                   "    if (i < n) y[i] = a * x[i] + y[i];\n"
                   "  }");
  EXPECT_EQ(ok(run(t, src, 2, saxpy_ctx)), expected);
  const auto four = ok(run(t, src, 4, saxpy_ctx));
  EXPECT_TRUE(contains(four, "(blockIdx.x * 4u + 3u)"));
  EXPECT_FALSE(contains(four, "(blockIdx.x * 4u + 4u)"));
}

TEST(transform_golden, coarsen_rewrites_grid_stride_loops_and_other_dimensions) {
  const auto t = make("coarsen", "c");
  const auto ctx = context("k", {"y"}, {});
  const std::string src =
      "extern \"C\" __global__ void k(int n, float* y) {\n  //@kf coarsen c dim=y\n  {\n"
      "    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < n; i += blockDim.y * gridDim.y) y[i] += "
      "1;\n"
      "  }\n}\n";
  EXPECT_EQ(ok(run(t, src, 2, ctx)),
            "extern \"C\" __global__ void k(int n, float* y) {\n  //@kf coarsen c dim=y\n  {\n"
            "    for (int i = (blockIdx.y * 2u + 0u) * blockDim.y + threadIdx.y; i < n; i += blockDim.y * "
            "(gridDim.y * "
            "2u)) y[i] += 1;\n  }\n  {\n"
            "    for (int i = (blockIdx.y * 2u + 1u) * blockDim.y + threadIdx.y; i < n; i += blockDim.y * "
            "(gridDim.y * "
            "2u)) y[i] += 1;\n  }\n}\n");
}

TEST(transform_golden, coarsen_refuses_blocks_outside_its_form) {
  const auto t = make("coarsen", "c");
  const auto ctx = context("k", {"y"}, {});
  auto kernel = [](const std::string& before, const std::string& block, const std::string& ann = "") {
    return "extern \"C\" __global__ void k(int n, float* y) {\n" + before + "  //@kf coarsen c" + ann + "\n" +
           block + "\n}\n";
  };
  auto fails = [&](const std::string& src, const std::string& part) {
    EXPECT_TRUE(contains(err(run(t, src, 2, ctx), "coarsen", "c"), part)) << src;
  };
  const std::string good =
      "  {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = 0;\n  }";
  EXPECT_TRUE(run(t, kernel("", good), 2, ctx).ok());
  fails(kernel("",
               "  {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= n) return;\n    y[i] = "
               "0;\n  }"),
        "'return'");
  fails(kernel("  int b = blockIdx.x;\n", good), "outside the block");
  fails(kernel("  int g = gridDim.x;\n", good), "outside the block");
  fails(kernel("", "  if (n > 0) {\n    y[blockIdx.x] = 0;\n  }"), "expected a { ... } block");
  fails(kernel("", "  {\n    y[threadIdx.x] = 0;\n  }"), "does not use blockIdx.x");
  fails(kernel("", good, " dim=w"), "dim=w");
  fails("#define IDX (blockIdx.x * blockDim.x + threadIdx.x)\n" + kernel("", good), "preprocessor line");
  fails(
      "__device__ void h() {\n  //@kf coarsen c\n  {\n    int b = blockIdx.x;\n  }\n}\n"
      "extern \"C\" __global__ void k(int n, float* y) { y[0] = n; }\n",
      "not inside the entry");
  EXPECT_TRUE(contains(err(run(t, kernel("", good), 2, context("other", {}, {})), "coarsen", "c"),
                       "no __global__ definition of the entry 'other'"));
}

// --- smem_tile ---------------------------------------------------------------------------------------------

TEST(transform_golden, smem_tile_stages_the_tile_with_padding) {
  const auto src = input("transpose.cu");
  const auto t = make("smem_tile", "tile");
  const auto pad1 = ok(run(t, src, "shared_pad1", transpose_ctx));
  expect_golden(pad1, "transpose.pad1.expected.cu");
  // pad 0 differs only in the declaration.
  std::string pad0 = pad1;
  const std::string decl = "__shared__ float kf_tile[TILE][TILE + 1];";
  ASSERT_TRUE(contains(pad0, decl));
  pad0.replace(pad0.find(decl), decl.size(), "__shared__ float kf_tile[TILE][TILE + 0];");
  EXPECT_EQ(ok(run(t, src, "shared_pad0", transpose_ctx)), pad0);
  EXPECT_EQ(ok(run(t, src, "direct", transpose_ctx)), src);
}

TEST(transform_golden, smem_tile_refuses_blocks_outside_its_form) {
  const auto t = make("smem_tile", "s");
  const auto ctx = context("k", {"A", "y"}, {"A"});
  auto kernel = [](const std::string& ann, const std::string& def, const std::string& block) {
    return "extern \"C\" __global__ void k(int n, const float* A, float* y) {\n  //@kf smem_tile s" + ann +
           "\n" + def + "\n" + block + "\n}\n";
  };
  const std::string ann = " array=A rows=8 cols=8", def = "#define at(r, c) A[(r) * 8 + (c)]",
                    block = "  {\n    y[threadIdx.x] = at(threadIdx.x % 8, threadIdx.x / 8);\n  }";
  EXPECT_TRUE(run(t, kernel(ann, def, block), "shared_pad1", ctx).ok());
  auto fails = [&](const std::string& src, const std::string& part, const value& v = "shared_pad1") {
    EXPECT_TRUE(contains(err(run(t, src, v, ctx), "smem_tile", "s"), part)) << src;
  };
  fails(kernel(" array=A rows=8", def, block), "needs cols=", "direct");
  fails(kernel(" array=A rows=8 cols=8 pad=1", def, block), "unknown annotation argument 'pad'", "direct");
  fails(kernel(" array=A rows=8 cols=a,b", def, block), "rows= and cols=", "direct");
  fails(kernel(ann, "#define at(r) A[r]", block), "two parameters");
  fails(kernel(ann, "#define at A[0]", block), "function-like macro");
  fails(kernel(ann, "#define at(r, c) A[(r) * 8 + (c) + threadIdx.x]", block), "uses threadIdx");
  fails(kernel(ann, "", block), "expected '#define");
  fails(kernel(ann, def, "  if (n) {\n    y[0] = at(0, 0);\n  }"), "expected a { ... } block");
  fails(kernel(ann, def, "  {\n    if (threadIdx.x > n) return;\n    y[0] = at(0, 0);\n  }"), "'return'");
  fails(kernel(ann, def, "  {\n    at(0, 0) = 1.0f;\n  }"), "writes at(...)");
  fails(kernel(" array=B rows=8 cols=8", def, block), "element type of 'B'");
  fails(kernel(ann, def, block), "unknown value 'shared'", "shared");
  // Applied twice: the second finds the staging code after the #define, not the block.
  const auto once = ok(run(t, kernel(ann, def, block), "shared_pad0", ctx));
  fails(once, "expected a { ... } block");
  // Two annotations of the site.
  fails(kernel(ann, def, block) + "//@kf smem_tile s array=A rows=8 cols=8\n", "marked 2 times", "direct");
}

// --- pipeline ----------------------------------------------------------------------------------------------

TEST(transform_golden, pipeline_two_and_three_stages) {
  const auto src = input("matmul_tiled.cu");
  const auto t = make("pipeline", "k_tiles");
  expect_golden(ok(run(t, src, 2, matmul_ctx)), "matmul_tiled.stages2.expected.cu");
  const auto three = ok(run(t, src, 3, matmul_ctx));
  expect_golden(three, "matmul_tiled.stages3.expected.cu");
  // The helpers are added once, even when a second pipeline is applied to the result.
  EXPECT_EQ(three.find("#ifndef KF_CP_ASYNC_HELPERS"), 0u);
  EXPECT_EQ(three.find("#ifndef KF_CP_ASYNC_HELPERS", 1), std::string::npos);
  // Pipelining again is a conflict: the loop is gone.
  EXPECT_TRUE(contains(err(run(t, three, 2, matmul_ctx), "pipeline", "k_tiles"), "expected a for loop"));
}

TEST(transform_golden, pipeline_refuses_loops_outside_its_form) {
  const auto t = make("pipeline", "p");
  const auto ctx = context("k", {"A", "y"}, {"A"});
  auto kernel = [](const std::string& ann, const std::string& body,
                   const std::string& decl = "  __shared__ float S[32];\n", const std::string& after = "") {
    return "extern \"C\" __global__ void k(int n, const float* A, float* y) {\n" + decl +
           "  float acc = 0;\n" + "  //@kf pipeline p" + ann + "\n  for (int t = 0; t < n; ++t) {\n" + body +
           "  }\n" + after + "  y[threadIdx.x] = acc;\n}\n";
  };
  const std::string good =
      "    S[threadIdx.x] = A[t * 32 + threadIdx.x];\n    __syncthreads();\n"
      "    acc += S[(threadIdx.x + 1) % 32];\n    __syncthreads();\n";
  EXPECT_TRUE(run(t, kernel(" buffers=S", good), 2, ctx).ok());
  auto fails = [&](const std::string& src, const std::string& part, const value& v = 2) {
    EXPECT_TRUE(contains(err(run(t, src, v, ctx), "pipeline", "p"), part)) << src;
  };
  fails(kernel("", good), "needs buffers=", 1);
  fails(kernel(" buffers=S", "    S[threadIdx.x] = A[t * 32 + threadIdx.x];\n    acc += S[0];\n"),
        "top-level '__syncthreads();'");
  fails(kernel(" buffers=S", "    S[threadIdx.x] = A[t];\n    __syncthreads();\n    acc += S[0];\n"),
        "must end with");
  fails(kernel(" buffers=S", "    __syncthreads();\n    acc += S[0];\n    __syncthreads();\n"), "load part");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = 2.0f * A[t];\n    __syncthreads();\n    acc += S[0];\n    "
               "__syncthreads();\n"),
        "must read 'G[...]'");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = A[t] + 1.0f;\n    __syncthreads();\n    acc += S[0];\n    "
               "__syncthreads();\n"),
        "exactly 'G[...]'");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = (t < n) ? A[t] : 1.0f;\n    __syncthreads();\n    acc += S[0];\n    "
               "__syncthreads();\n"),
        "'(cond) ? G[...] : 0'");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = y[t];\n    __syncthreads();\n    acc += S[0];\n    y[t] = acc;\n    "
               "__syncthreads();\n"),
        "writes 'y'");
  fails(kernel(" buffers=S",
               "    acc += S[0];\n    S[threadIdx.x] = A[t];\n    __syncthreads();\n    __syncthreads();\n"),
        "may only be the target");
  fails(kernel(" buffers=S",
               "    float v[1]; v[0] = 1;\n    S[threadIdx.x] = v[0];\n    __syncthreads();\n    "
               "__syncthreads();\n"),
        "not a pointer parameter");
  fails(kernel(" buffers=T", good), "no __shared__ array declaration of 'T'");
  fails(kernel(" buffers=S", good, "  extern __shared__ float S[];\n"), "dynamic");
  fails(kernel(" buffers=S", good, "  __shared__ float S[32];\n", "  acc += S[0];\n"),
        "used outside the loop");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = A[t];\n    __syncthreads();\n    if (acc > 1) break;\n    "
               "__syncthreads();\n"),
        "'break'");
  fails(kernel(" buffers=S",
               "    S[threadIdx.x] = A[t];\n    __syncthreads();\n    acc += S[0];\n    __syncthreads();\n") +
            "//@kf pipeline p buffers=S\n",
        "marked 2 times", 1);
}

// --- read_only ---------------------------------------------------------------------------------------------

TEST(transform_golden, read_only_restrict_and_ldg) {
  const std::string src =
      "// x[i] in a comment stays\n"
      "extern \"C\" __global__ void __launch_bounds__(128)\n"
      "k(int n, const float* x, int *idx, float* __restrict__ y, float2* w) {\n"
      "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i >= n) return;\n"
      "  const char* s = \"x[i]\";  // a string stays\n"
      "  const float* p = &x[i];\n"
      "  y[i] = x[idx[i]] + x[i] * p[0] + w[i].x + sizeof(s);\n"
      "  float2 v = w[idx[i + 1]];\n"
      "  y[i] += v.y;\n"
      "}\n";
  const auto ctx = context("k", {"x", "idx", "y", "w"}, {"x", "idx", "w"});
  const auto t = make("read_only");
  EXPECT_EQ(ok(run(t, src, "none", ctx)), src);
  const std::string sig_restrict =
      "k(int n, const float* __restrict__ x, const int *__restrict__ idx, float* __restrict__ y, const "
      "float2* "
      "__restrict__ w) {\n";
  std::string restricted = src;
  restricted.replace(restricted.find("k(int n"), restricted.find(") {\n") + 4 - restricted.find("k(int n"),
                     sig_restrict);
  EXPECT_EQ(ok(run(t, src, "restrict", ctx)), restricted);
  std::string ldg = restricted;
  auto sub = [&](const std::string& from, const std::string& to) {
    ASSERT_TRUE(contains(ldg, from)) << from;
    ldg.replace(ldg.find(from), from.size(), to);
  };
  sub("  y[i] = x[idx[i]] + x[i] * p[0] + w[i].x + sizeof(s);\n",
      "  y[i] = __ldg(&x[__ldg(&idx[i])]) + __ldg(&x[i]) * p[0] + __ldg(&w[i]).x + sizeof(s);\n");
  sub("  float2 v = w[idx[i + 1]];\n", "  float2 v = __ldg(&w[__ldg(&idx[i + 1])]);\n");
  EXPECT_EQ(ok(run(t, src, "ldg", ctx)), ldg);
  // Idempotent: applying again changes nothing.
  EXPECT_EQ(ok(run(t, ldg, "ldg", ctx)), ldg);
}

TEST(transform_golden, read_only_matches_buffers_by_position_and_refuses_what_it_cannot_qualify) {
  const auto t = make("read_only");
  const std::string src = "extern \"C\" __global__ void k(const float* a, float* b) { b[0] = a[0]; }\n";
  // The description's buffers have other names: matched by position.
  EXPECT_EQ(ok(run(t, src, "ldg", context("k", {"in", "out"}, {"in"}))),
            "extern \"C\" __global__ void k(const float* __restrict__ a, float* __restrict__ b) { b[0] = "
            "__ldg(&a[0]); }\n");
  EXPECT_TRUE(contains(err(run(t, src, "restrict", context("k", {"a", "c"}, {"a"})), "read_only", ""),
                       "buffer 'c' is not a parameter"));
  const std::string arr = "extern \"C\" __global__ void k(const float a[], float* b) { b[0] = a[0]; }\n";
  EXPECT_TRUE(contains(err(run(t, arr, "restrict", context("k", {"a", "b"}, {"a"})), "read_only", ""),
                       "not a plain pointer"));
  const std::string shadow =
      "extern \"C\" __global__ void k(const float* a, float* b) { { float a[2] = {1, 2}; b[0] = a[1]; } }\n";
  EXPECT_TRUE(
      contains(err(run(t, shadow, "ldg", context("k", {"a", "b"}, {"a"})), "read_only", ""), "shadowing"));
  EXPECT_TRUE(run(t, shadow, "restrict", context("k", {"a", "b"}, {"a"})).ok());
  // Element types __ldg does not take are left as plain reads.
  const std::string half =
      "struct P { float v; };\nextern \"C\" __global__ void k(const P* a, float* b) { b[0] = a[0].v; }\n";
  EXPECT_EQ(ok(run(t, half, "ldg", context("k", {"a", "b"}, {"a"}))),
            "struct P { float v; };\nextern \"C\" __global__ void k(const P* __restrict__ a, float* "
            "__restrict__ b) { "
            "b[0] = a[0].v; }\n");
  EXPECT_TRUE(
      contains(err(run(t, src, "restrict", context("kk", {}, {})), "read_only", ""), "no __global__"));
}

// --- launch_bounds, register_cap, compiler_flags -----------------------------------------------------------

TEST(transform_golden, launch_bounds_inserts_or_replaces) {
  const std::string plain = "extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 0; }\n";
  const std::string bounded =
      "template <int B>\n__global__ void __launch_bounds__(B * 2) k(float* y) { y[threadIdx.x] = 0; }\n";
  const auto ctx = context("k", {"y"}, {});
  const auto with_max = make("launch_bounds", "", {{"max_threads", "block_size"}});
  const auto from_source = make("launch_bounds");
  EXPECT_EQ(
      ok(run(with_max, plain, 2, ctx)),
      "extern \"C\" __global__ void __launch_bounds__(block_size, 2) k(float* y) { y[threadIdx.x] = 0; }\n");
  EXPECT_EQ(ok(run(with_max, plain, 0, ctx)), plain);
  EXPECT_EQ(
      ok(run(from_source, bounded, 4, ctx)),
      "template <int B>\n__global__ void __launch_bounds__(B * 2, 4) k(float* y) { y[threadIdx.x] = 0; }\n");
  EXPECT_EQ(ok(run(with_max, bounded, 1, ctx)),
            "template <int B>\n__global__ void __launch_bounds__(block_size, 1) k(float* y) { y[threadIdx.x] "
            "= 0; }\n");
  EXPECT_TRUE(contains(err(run(from_source, plain, 2, ctx), "launch_bounds", ""), "max_threads"));
  EXPECT_TRUE(contains(err(run(from_source, plain, 0, context("q", {}, {})), "launch_bounds", ""), "'q'"));
  // A declaration (no body) and a __device__ function of the same name are not the entry.
  const std::string decl =
      "__device__ void k(float* y) {}\nextern \"C\" __global__ void k2(float* y);\n" + plain;
  EXPECT_TRUE(contains(ok(run(with_max, decl, 2, ctx)),
                       "__global__ void __launch_bounds__(block_size, 2) k(float* y) {"));
  const std::string twice = plain + "extern \"C\" __global__ void k(int* y) { }\n";
  EXPECT_TRUE(contains(err(run(with_max, twice, 2, ctx), "launch_bounds", ""), "2 __global__ definitions"));
}

TEST(transform_golden, register_cap_and_compiler_flags_only_add_options) {
  const std::string src = input("rowsum.cu");
  const auto cap = make("register_cap");
  EXPECT_EQ(run(cap, src, 64, rowsum_ctx).options, (std::vector<std::string>{"--maxrregcount=64"}));
  EXPECT_EQ(run(cap, src, 64, rowsum_ctx).source, src);
  EXPECT_TRUE(run(cap, src, 0, rowsum_ctx).options.empty());
  const auto flags = make("compiler_flags", "",
                          {{"extra_vectorization", true}, {"ptxas", {"default", "-O1", "-dlcm=ca -O2"}}});
  auto opts = [&](bool fm, bool ev, const std::string& px) {
    const auto r =
        flags.apply(src, {{"fast_math", fm}, {"extra_vectorization", ev}, {"ptxas", value(px)}}, rowsum_ctx);
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.source, src);
    return r.options;
  };
  EXPECT_EQ(opts(false, false, "default"), std::vector<std::string>{});
  EXPECT_EQ(opts(true, false, "default"), std::vector<std::string>{"--use_fast_math"});
  EXPECT_EQ(opts(false, true, "-O1"),
            (std::vector<std::string>{"--extra-device-vectorization", "--ptxas-options=-O1"}));
  EXPECT_EQ(opts(true, true, "-dlcm=ca -O2"),
            (std::vector<std::string>{"--use_fast_math", "--extra-device-vectorization",
                                      "--ptxas-options=-dlcm=ca", "--ptxas-options=-O2"}));
}

// --- tensor_core -------------------------------------------------------------------------------------------

TEST(transform_golden, tensor_core_switches_the_alternatives) {
  const auto src = input("gemm_mma.cu");
  const auto t = make("tensor_core", "mma_k");
  const std::string s1 = "//@kf tensor_core mma_k begin=scalar\n#if 1\n",
                    m0 = "//@kf tensor_core mma_k begin=mma\n#if 0\n";
  ASSERT_TRUE(contains(src, s1) && contains(src, m0));
  std::string expected = src;
  expected.replace(expected.find(s1), s1.size(), "//@kf tensor_core mma_k begin=scalar\n#if 0\n");
  expected.replace(expected.find(m0), m0.size(), "//@kf tensor_core mma_k begin=mma\n#if 1\n");
  EXPECT_EQ(ok(run(t, src, "mma", gemm_ctx)), expected);
  EXPECT_EQ(ok(run(t, src, "scalar", gemm_ctx)), src);
  // A second instance at the site finds a non-default alternative active: a conflict.
  EXPECT_TRUE(contains(err(run(t, expected, "scalar", gemm_ctx), "tensor_core", "mma_k"),
                       "active alternative is 'mma'"));
}

TEST(transform_golden, tensor_core_refuses_malformed_groups) {
  auto group = [](const std::string& a, const std::string& b,
                  const std::string& tail = "//@kf tensor_core s end\n") {
    return "//@kf tensor_core s begin=scalar\n" + a + "//@kf tensor_core s begin=mma\n" + b + tail;
  };
  const auto t = make("tensor_core", "s");
  const std::string on = "#if 1\nx = 1;\n#endif\n",
                    off = "#if 0 // mma\nx = 2;\n#if FOO\ny();\n#endif\n#endif\n\n";
  EXPECT_EQ(ok(run(t, group(on, off), "mma")),
            group("#if 0\nx = 1;\n#endif\n", "#if 1 // mma\nx = 2;\n#if FOO\ny();\n#endif\n#endif\n\n"));
  auto fails = [&](const std::string& src, const std::string& part, const value& v = "mma") {
    EXPECT_TRUE(contains(err(run(t, src, v), "tensor_core", "s"), part)) << src;
  };
  fails(group(on, on), "exactly one alternative");
  fails(group(off, off), "exactly one alternative");
  fails(group(off, on), "default choice is 'scalar'", "scalar");
  fails(group(on, off, ""), "no end marker");
  fails(group(on, "x = 2;\n"), "must start with a line '#if 0'");
  fails(group(on, "#if 2\nx = 2;\n#endif\n"), "'#if 0' or '#if 1'");
  fails(group(on, "#if 0\nx = 2;\n"), "no #endif");
  fails(group(on, "#if 0\nx = 2;\n#else\nx = 3;\n#endif\n"), "#else");
  fails(group(on, "#if 0\nx = 2;\n#endif\nx = 3;\n"), "text after the #endif");
  fails(group(on, off), "no alternative 'wmma'", "wmma");
  fails("//@kf tensor_core s begin=scalar\n" + on + "//@kf tensor_core s end\n", "at least two");
  fails("//@kf tensor_core s end\n", "expected '//@kf tensor_core s begin=<name>'");
  fails("//@kf tensor_core s begin=scalar\n" + on + "//@kf tensor_core s begin=scalar\n" + off +
            "//@kf tensor_core s end\n",
        "two alternatives named 'scalar'");
  // Several groups at one site (e.g. copies made by coarsen) are switched together.
  EXPECT_EQ(ok(run(t, group(on, off) + group(on, off), "mma")),
            group("#if 0\nx = 1;\n#endif\n", "#if 1 // mma\nx = 2;\n#if FOO\ny();\n#endif\n#endif\n\n") +
                group("#if 0\nx = 1;\n#endif\n", "#if 1 // mma\nx = 2;\n#if FOO\ny();\n#endif\n#endif\n\n"));
}

TEST(transform_golden, tensor_core_switches_three_alternatives_in_every_group) {
  // The shape of experiments/kernels/gemm_bf16: a file-scope group and a body group with scalar, mma and
  // wgmma; wgmma's groups hold nested #if / #elif / #else / #error, which stay as they are.
  auto source = [](char s, char m, char w) {
    return std::string("//@kf tensor_core gemm begin=scalar\n#if ") + s +
           "\n#define THREADS 256\n#endif\n"
           "//@kf tensor_core gemm begin=mma\n#if " +
           m +
           "\n#define THREADS 128\n#endif\n"
           "//@kf tensor_core gemm begin=wgmma\n#if " +
           w +
           "\n#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
           "#error \"needs sm_90a\"\n#endif\n"
           "#define THREADS 384\n#if N == 64\n#define MMA mma64\n#elif N == 128\n#define MMA mma128\n"
           "#else\n#error \"N\"\n#endif\n#endif\n"
           "//@kf tensor_core gemm end\n"
           "__global__ void k(float* c) {\n"
           "//@kf tensor_core gemm begin=scalar\n#if " +
           s +
           "\n  c[0] = 1;\n#endif\n"
           "//@kf tensor_core gemm begin=mma\n#if " +
           m +
           "\n  c[0] = 2;\n#endif\n"
           "//@kf tensor_core gemm begin=wgmma\n#if " +
           w + "\n  c[0] = 3;\n#endif\n//@kf tensor_core gemm end\n}\n";
  };
  const auto t = make("tensor_core", "gemm", {{"choices", {"scalar", "mma", "wgmma"}}});
  const auto src = source('1', '0', '0');
  EXPECT_EQ(ok(run(t, src, "scalar")), src);
  EXPECT_EQ(ok(run(t, src, "mma")), source('0', '1', '0'));
  EXPECT_EQ(ok(run(t, src, "wgmma")), source('0', '0', '1'));
  EXPECT_TRUE(contains(err(run(t, src, "wmma"), "tensor_core", "gemm"), "offers scalar, mma, wgmma"));
}

// --- Annotations -------------------------------------------------------------------------------------------

TEST(transform_golden, annotation_parsing_edge_cases) {
  const std::string src =
      "//@kf unroll a\n"                              // at the start of the source
      "  \t//@kf vectorize b index=i arrays=x,y\r\n"  // indented with tabs, CRLF
      "// @kf unroll c\n"                             // a space after //: an ordinary comment
      "int x; //@kf unroll d\n"                       // not at the start of its line: an ordinary comment
      "//@kf coarsen e dim=y flag k=\n"               // a key without value, an empty value
      "//@kf\n"                                       // no operator
      "//@kf tensor_core f begin=a begin=b\n"         // a repeated key: the last one wins
      "//@kf unroll g";                               // the last line, without a newline
  const auto as = find_annotations(src);
  ASSERT_EQ(as.size(), 6u);
  EXPECT_EQ(as[0].op, "unroll");
  EXPECT_EQ(as[0].site, "a");
  EXPECT_EQ(as[0].line_begin, 0u);
  EXPECT_EQ(as[0].line_end, 15u);
  EXPECT_EQ(as[1].op, "vectorize");
  EXPECT_EQ(as[1].site, "b");
  EXPECT_EQ(as[1].args, (std::map<std::string, std::string>{{"index", "i"}, {"arrays", "x,y"}}));
  EXPECT_EQ(as[2].op, "coarsen");
  EXPECT_EQ(as[2].args, (std::map<std::string, std::string>{{"dim", "y"}, {"flag", ""}, {"k", ""}}));
  EXPECT_EQ(as[3].op, "");
  EXPECT_EQ(as[4].args.at("begin"), "b");
  EXPECT_EQ(as[5].site, "g");
  EXPECT_EQ(as[5].line_end, src.size());
  // A site marked only by a malformed annotation ("//@kfunroll") is missing for the operators.
  const auto t = make("unroll", "h");
  EXPECT_TRUE(
      contains(err(run(t, "//@kfunroll h\nfor (;;) {}\n", 2), "unroll", "h"), "missing from the source"));
  // The annotation's own line stays; only lines after it change; CRLF sources keep working.
  EXPECT_EQ(ok(run(t, "\t//@kf unroll h\r\n\tfor (;;) {}\r\n", 2)),
            "\t//@kf unroll h\r\n\t#pragma unroll 2\n\tfor (;;) {}\r\n");
}

// --- Determinism and purity --------------------------------------------------------------------------------

TEST(transform_golden, transforms_are_deterministic_and_thread_safe) {
  const auto src = input("matmul_tiled.cu");
  const auto t = make("pipeline", "k_tiles");
  const auto first = ok(run(t, src, 3, matmul_ctx));
  std::vector<std::string> outs(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < outs.size(); ++i)
    threads.emplace_back([&, i] { outs[i] = run(t, src, 3, matmul_ctx).source; });
  for (auto& th : threads)
    th.join();
  for (const auto& o : outs)
    EXPECT_EQ(o, first);
}

}  // namespace
}  // namespace kf
