// Tensor map arguments of kernel descriptions (`tensor_map:`, docs/kernel.md) without a GPU: what a
// description resolves to at a shape and configuration (dims innermost first, byte strides, box, swizzle,
// the viewed buffer and its element type, `when`), the driver's rules for cuTensorMapEncodeTiled checked
// by tensor_map_problem, misuse reported at load as a config error naming the file, the key and the reason,
// a configuration whose map breaks the rules resolving to an error (an invalid trial, not a crash), and the
// layout's round trip through the worker protocol.
#include <gtest/gtest.h>

#include <string>

#include "evaluators/cuda/protocol.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

// A GEMM-like description: A [M x K] bf16 viewed as K (inner) x M tiles of 64 x bm.
std::string description(const std::string& tensor_map) {
  return R"(name: tm
source: tm.cu
entry: tm
parameters:
  - {name: bm, values: [64, 128, 512], default: 64}
  - {name: use_tma, values: [0, 1], default: 1}
arguments:
  - {name: M, scalar: i32, value: M}
  - {name: K, scalar: i32, value: K}
  - {name: A, buffer: bf16, size: "M * K"}
  - {name: tmA, tensor_map: )" +
         tensor_map + "}\n" + R"(  - {name: C, buffer: f32, size: M, role: out}
  - {name: I, buffer: i32, size: M}
grid: [1]
block: [128]
shapes:
  time: [{M: 256, K: 512}]
  check: [{M: 100, K: 72}]
)";
}

kernel_spec load(const test::temp_dir& tmp, const std::string& yaml) {
  test::write_file(tmp.path() / "tm.cu", "extern \"C\" __global__ void tm() {}\n");
  return load_kernel_spec(test::write_file(tmp.path() / "tm.yaml", yaml).string());
}

void expect_load_error(const std::string& yaml, const std::string& key, const std::string& words) {
  test::temp_dir tmp;
  try {
    load(tmp, yaml);
    FAIL() << "accepted:\n" << yaml;
  } catch (const config_error& e) {
    EXPECT_NE(e.file().find("tm.yaml"), std::string::npos) << e.what();
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

const std::string kGood = R"({buffer: A, dims: [K, M], box: [64, bm], swizzle: 128, l2_promotion: 256})";

config with(const kernel_spec& k, const char* name, const value& v) {
  config c = k.defaults;
  const auto i = k.space.param_index(name);
  EXPECT_TRUE(i.has_value()) << name;
  c[*i] = static_cast<std::uint32_t>(*k.space.value_index(*i, v));
  return c;
}

TEST(tensor_map, resolves_dims_innermost_first_with_byte_strides_and_the_buffers_type) {
  test::temp_dir tmp;
  const auto k = load(tmp, description(kGood));
  ASSERT_EQ(k.args.size(), 6u);
  const auto& spec = k.args[3];
  ASSERT_TRUE(spec.tensor_map.has_value());
  EXPECT_FALSE(spec.buffer);
  EXPECT_TRUE(spec.param);
  EXPECT_EQ(spec.type, dtype::bf16);  // from A
  const auto p = resolve_launch(k, with(k, "bm", value(128)), k.time_shapes.front());
  const auto& a = p.args[3];
  ASSERT_TRUE(a.tensor_map.has_value());
  EXPECT_FALSE(a.buffer);
  EXPECT_EQ(a.type, dtype::bf16);
  const auto& t = *a.tensor_map;
  EXPECT_TRUE(t.enabled);
  EXPECT_EQ(t.buffer, 2u);  // A
  EXPECT_EQ(t.rank, 2u);
  EXPECT_EQ(t.dims[0], 512u);      // K
  EXPECT_EQ(t.dims[1], 256u);      // M
  EXPECT_EQ(t.strides[0], 1024u);  // K bf16 = one row of A, in bytes
  EXPECT_EQ(t.box[0], 64u);
  EXPECT_EQ(t.box[1], 128u);
  EXPECT_EQ(t.swizzle, 128u);
  EXPECT_EQ(t.l2_promotion, 256u);
  EXPECT_FALSE(t.oob_nan);
}

TEST(tensor_map, explicit_strides_are_elements_and_when_false_disables_the_map) {
  test::temp_dir tmp;
  // A viewed as its first 32 columns of every row: dims [32, M], stride K elements.
  const auto k = load(
      tmp,
      description(
          R"({buffer: A, dims: [32, M], strides: [K], box: [32, 16], when: "use_tma == 1 and K % 8 == 0"})"));
  const auto p = resolve_launch(k, k.defaults, k.time_shapes.front());
  EXPECT_EQ(p.args[3].tensor_map->dims[0], 32u);
  EXPECT_EQ(p.args[3].tensor_map->strides[0], 1024u);
  EXPECT_EQ(p.args[3].tensor_map->swizzle, 0u);
  // `when` false: on a configuration without TMA, and on a shape whose rows are not 16-byte aligned.
  EXPECT_FALSE(
      resolve_launch(k, with(k, "use_tma", value(0)), k.time_shapes.front()).args[3].tensor_map->enabled);
  const shape odd{{"M", value(10)}, {"K", value(65)}};
  EXPECT_FALSE(resolve_launch(k, k.defaults, odd).args[3].tensor_map->enabled);
}

TEST(tensor_map, misuse_is_a_config_error_naming_file_key_and_reason) {
  const std::string at = "arguments[3].tensor_map";
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], boxes: 1})"), at + ".boxes",
                    "unknown key");
  expect_load_error(description(R"({buffer: Q, dims: [K, M], box: [64, bm]})"), at + ".buffer",
                    "no buffer argument named 'Q'");
  expect_load_error(description(R"({buffer: K, dims: [K, M], box: [64, bm]})"), at + ".buffer",
                    "no buffer argument named 'K'");  // a scalar is no buffer
  expect_load_error(description(R"({buffer: A, dims: [K, M, 1, 1, 1, 1], box: [64, bm, 1, 1, 1, 1]})"),
                    at + ".dims", "1 to 5 dimensions");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64]})"), at + ".box",
                    "expected 2 entries");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], strides: [K, 1]})"),
                    at + ".strides", "expected 1 entries");
  expect_load_error(description(R"({buffer: A, box: [64, bm]})"), at, "missing key 'dims'");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], swizzle: 100})"), at + ".swizzle",
                    "one of 0, 32, 64, 128");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], l2_promotion: 32})"),
                    at + ".l2_promotion", "one of 0, 64, 128, 256");
  expect_load_error(description(R"({buffer: I, dims: [M], box: [16], oob_fill: nan})"), at + ".oob_fill",
                    "nan fills floating types only");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], oob_fill: ones})"),
                    at + ".oob_fill", "expected zero or nan");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm + ]})"), at + ".box[1]", "");
  // Rules that need the shape: checked at the default configuration on every shape, reported at the map.
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, 4 * bm + 1]})"), at,
                    "box[1] = 257 is not in [1, 256]");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [128, bm], swizzle: 128})"), at,
                    "box[0] is 256 bytes (128 bf16), more than the 128-byte swizzle span");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [12, bm]})"), at,
                    "box[0] is 24 bytes (12 bf16): not a multiple of 16");
  expect_load_error(description(R"({buffer: A, dims: [K, 2 * M], box: [64, bm]})"), at, "past the buffer's");
  // Rows of K - 7 = 505 bf16 (the time shape) do not start 16-byte aligned.
  expect_load_error(description(R"({buffer: A, dims: [K - 7, M], strides: [K - 7], box: [64, bm]})"), at,
                    "the stride of dimension 1 is 1010 bytes: not a multiple of 16");
  expect_load_error(description(R"({buffer: A, dims: [K, M], box: [64, bm], when: "'yes'"})"), at,
                    "not a truth value");
  // A tensor map takes none of a buffer's keys, and only one kind per argument.
  expect_load_error(description(kGood + ", size: 4"), "arguments[3].size",
                    "a tensor map takes only name and tensor_map");
  expect_load_error(description("{buffer: A, dims: [K], box: [8]}, buffer: bf16"), "arguments[3]",
                    "give exactly one of");
}

TEST(tensor_map, a_configuration_whose_map_breaks_the_rules_does_not_resolve) {
  test::temp_dir tmp;
  const auto k = load(tmp, description(kGood));
  // bm = 512: a box of 512 rows, over the 256 the driver allows: the trial is invalid.
  try {
    resolve_launch(k, with(k, "bm", value(512)), k.time_shapes.front());
    FAIL() << "resolved a box of 512";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor map tmA over A: box[1] = 512 is not in [1, 256]"),
              std::string::npos)
        << e.what();
  }
}

TEST(tensor_map, the_drivers_rules) {
  tensor_map_layout t;
  t.rank = 2;
  t.dims = {64, 32};
  t.strides = {128};
  t.box = {64, 32};
  t.swizzle = 128;
  const std::uint64_t bytes = 64 * 32 * 2;
  EXPECT_EQ(tensor_map_problem(t, dtype::bf16, bytes), "");
  EXPECT_NE(tensor_map_problem(t, dtype::bf16, bytes - 2).find("past the buffer's 4094"), std::string::npos);
  EXPECT_NE(tensor_map_problem(t, dtype::f32, 2 * bytes).find("more than the 128-byte swizzle span"),
            std::string::npos);
  auto u = t;
  u.strides = {120};
  EXPECT_NE(tensor_map_problem(u, dtype::bf16, bytes).find("not a multiple of 16"), std::string::npos);
  u = t;
  u.rank = 0;
  EXPECT_NE(tensor_map_problem(u, dtype::bf16, bytes).find("rank 0"), std::string::npos);
  u = t;
  u.dims[1] = 0;
  EXPECT_NE(tensor_map_problem(u, dtype::bf16, bytes).find("dims[1] = 0"), std::string::npos);
  u = t;
  u.oob_nan = true;
  EXPECT_EQ(tensor_map_problem(u, dtype::bf16, bytes), "");
  EXPECT_NE(tensor_map_problem(u, dtype::u16, bytes).find("nan fill needs a floating type"),
            std::string::npos);
  u = t;
  u.strides = {std::uint64_t{1} << 40};
  EXPECT_NE(tensor_map_problem(u, dtype::bf16, bytes).find("below 2^40"), std::string::npos);
  u = t;
  u.rank = 3;
  u.dims[2] = std::uint64_t{1} << 32;
  u.strides[1] = std::uint64_t{1} << 39;
  u.box[2] = 1;
  EXPECT_NE(tensor_map_problem(u, dtype::bf16, bytes).find("beyond 2^64"), std::string::npos);
  // A disabled map has nothing to check.
  u = tensor_map_layout{};
  u.enabled = false;
  EXPECT_EQ(tensor_map_problem(u, dtype::bf16, 0), "");
}

TEST(tensor_map, the_layout_travels_to_the_worker_unchanged) {
  test::temp_dir tmp;
  const auto k = load(tmp, description(kGood));
  gpu::evaluate_request r;
  r.id = 7;
  r.candidate = {"x.cubin", "tm"};
  gpu::shape_job job;
  job.args = resolve_launch(k, with(k, "bm", value(128)), k.time_shapes.front()).args;
  job.args[3].tensor_map->oob_nan = true;
  r.shapes.push_back(job);
  auto disabled = job;
  disabled.args[3].tensor_map = tensor_map_layout{};
  disabled.args[3].tensor_map->enabled = false;
  r.shapes.push_back(disabled);
  const auto back = gpu::request_from_json(nlohmann::json::parse(gpu::to_json(r).dump()));
  ASSERT_EQ(back.shapes.size(), 2u);
  const auto& a = back.shapes[0].args[3];
  ASSERT_TRUE(a.tensor_map.has_value());
  EXPECT_FALSE(a.buffer);
  EXPECT_EQ(a.type, dtype::bf16);
  const auto& t = *a.tensor_map;
  const auto& s = *job.args[3].tensor_map;
  EXPECT_EQ(t.buffer, s.buffer);
  EXPECT_EQ(t.rank, s.rank);
  EXPECT_EQ(t.dims, s.dims);
  EXPECT_EQ(t.strides, s.strides);
  EXPECT_EQ(t.box, s.box);
  EXPECT_EQ(t.swizzle, s.swizzle);
  EXPECT_EQ(t.l2_promotion, s.l2_promotion);
  EXPECT_TRUE(t.oob_nan);
  EXPECT_TRUE(t.enabled);
  EXPECT_FALSE(back.shapes[1].args[3].tensor_map->enabled);
  EXPECT_FALSE(back.shapes[0].args[2].tensor_map.has_value());  // A stays a buffer
  EXPECT_TRUE(back.shapes[0].args[2].buffer);
}

// The planted tensor-map faults that tests/gpu runs on an H200: every plant renders and compiles for sm_90
// (so that only the planted fault can fail there), PLANT 5's box is refused before any GPU, PLANT 3 makes
// no map, PLANT 1's dims cover half the rows.
TEST(tensor_map, the_planted_faults_compile_and_resolve_as_planted) {
  register_builtins();
  const auto k = load_kernel_spec((test::source_dir() / "experiments/kernels/planted/tma.yaml").string());
  test::temp_dir tmp;
  compiler nvrtc(tmp.path() / "cache");
  const auto plant = *k.space.param_index("PLANT");
  for (std::int64_t p = 0; p <= 5; ++p) {
    config c = k.defaults;
    c[plant] = static_cast<std::uint32_t>(*k.space.value_index(plant, value(p)));
    const auto v = render_variant(k, c);
    compile_request r;
    r.source = v.source;
    r.name = "planted_tma.cu";
    r.options = v.options;
    r.name_expressions = {v.entry};
    r.arch = "sm_90";
    const auto out = nvrtc.compile(r);
    EXPECT_TRUE(out.ok) << "PLANT " << p << ":\n" << out.log;
    for (const auto& s : k.time_shapes) {
      if (p == 5) {
        try {
          resolve_launch(k, c, s);
          ADD_FAILURE() << "PLANT 5 resolved";
        } catch (const error& e) {
          EXPECT_NE(std::string(e.what()).find("box[1] = 512 is not in [1, 256]"), std::string::npos)
              << e.what();
        }
        continue;
      }
      const auto plan = resolve_launch(k, c, s);
      const auto& t = *plan.args[4].tensor_map;
      EXPECT_EQ(t.enabled, p != 3) << p;
      if (!t.enabled) continue;
      EXPECT_EQ(t.dims[1], static_cast<std::uint64_t>(p == 1 ? 1024 : 2048)) << p;
      EXPECT_EQ(t.box[0] * 4u, 128u);
    }
  }
  // The reference (no TMA) compiles too.
  compile_request r;
  r.source = k.reference.source;
  r.name = "planted_tma.cu";
  r.name_expressions = {"planted_tma_reference"};
  r.arch = "sm_90";
  EXPECT_TRUE(nvrtc.compile(r).ok);
}

}  // namespace
}  // namespace kf
