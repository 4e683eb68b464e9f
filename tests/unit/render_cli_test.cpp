// `kforge render` without a GPU: the manifest agrees with the kernel description (launch, arguments,
// roofline), the CUBIN is the one the cuda evaluator compiles for the configuration (the same compile-cache
// key; after a search on fake workers, a cache hit), and every mistake on the command line is a usage error
// (exit 2) that names what is wrong.
#include <gtest/gtest.h>

#include <fstream>

#include "kforge/evaluators/compile.hpp"
#include "kforge/evaluators/cuda.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

test::command_result render(const std::string& args) {
  return test::run_command(std::string(KFORGE_CLI) + " render " + args + " 2>&1");
}

TEST(render_cli, conv2d_manifest_source_and_cubin_match_the_evaluator) {
  register_builtins();
  test::temp_dir tmp;
  const auto yaml = test::source_dir() / "experiments/kernels/conv2d/kernel.yaml";
  const auto k = load_kernel_spec(yaml.string());
  const auto config = k.space.to_json(k.defaults).dump();
  const auto out = tmp.path() / "v";
  auto r = render(yaml.string() + " --config " + quoted(config) + " --out " + out.string() + " --cache " +
                  (tmp.path() / "cache").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto m = read_json(out / "variant.json");
  const auto plan = resolve_launch(k, k.defaults, k.time_shapes.front());
  EXPECT_EQ(m["kernel"], "conv2d");
  EXPECT_EQ(m["configuration"], k.space.to_json(k.defaults));
  EXPECT_EQ(m["defaults"], k.space.to_json(k.defaults));
  EXPECT_EQ(m["shape"], (nlohmann::json{{"H", 8192}, {"R", 15}, {"W", 8192}}));
  EXPECT_EQ(m["launch"]["grid"], nlohmann::json(plan.grid));
  EXPECT_EQ(m["launch"]["block"], nlohmann::json(plan.block));
  EXPECT_EQ(m["launch"]["shared_bytes"], plan.shared_bytes);
  ASSERT_EQ(m["arguments"].size(), 6u);
  EXPECT_EQ(m["arguments"][0], (nlohmann::json{{"name", "H"},
                                               {"kind", "scalar"},
                                               {"type", "i32"},
                                               {"param", true},
                                               {"constant", false},
                                               {"value", 8192}}));
  EXPECT_EQ(m["arguments"][3]["count"], 8192 * 8192);
  EXPECT_EQ(m["arguments"][5]["role"], "out");
  EXPECT_EQ(m["lowered_name"], "conv2d");
  EXPECT_EQ(m["arch"], "sm_90");
  EXPECT_EQ(m["cache_hit"], false);
  EXPECT_DOUBLE_EQ(m["roofline"]["floor_ms"].get<double>(),
                   roofline_floor_ms(k, roofline(k, k.defaults, k.time_shapes.front()), h200_peaks));
  EXPECT_EQ(m["tolerance"]["f32"]["rel"], 1e-4);
  // The source is the rendered variant; the request (and so the cache key) is the evaluator's.
  const auto v = render_variant(k, k.defaults);
  EXPECT_EQ(read_text(out / "variant.cu"), v.source);
  const auto req = variant_compile_request(k, v, k.source_file, "sm_90");
  const compiler comp(tmp.path() / "cache" / "nvrtc");
  const auto res = comp.compile(req);
  ASSERT_TRUE(res.ok) << res.log;
  EXPECT_TRUE(res.cache_hit);
  EXPECT_EQ(m["cache_key"], res.key);
  EXPECT_EQ(read_text(out / "variant.cubin"), std::string(res.cubin.begin(), res.cubin.end()));
  // A second rendering is a cache hit with the same bytes.
  r = render(yaml.string() + " --config " + quoted(config) + " --out " + (tmp.path() / "w").string() +
             " --cache " + (tmp.path() / "cache").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(cache hit)"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(tmp.path() / "w/variant.cubin"), read_text(out / "variant.cubin"));
}

TEST(render_cli, gemm_bf16_wgmma_keeps_its_architecture_and_shared_memory) {
  register_builtins();
  test::temp_dir tmp;
  const auto yaml = test::source_dir() / "experiments/kernels/gemm_bf16/kernel.yaml";
  const auto k = load_kernel_spec(yaml.string());
  auto values = k.space.to_json(k.defaults);
  values["tensor_core_gemm"] = "wgmma";
  values["wgmma_m"] = 128;
  values["wgmma_n"] = 128;
  const auto out = tmp.path() / "v";
  const auto r = render(yaml.string() + " --config " + quoted(values.dump()) + " --out " + out.string() +
                        " --no-compile --shape 'check:4'");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto m = read_json(out / "variant.json");
  EXPECT_EQ(m["arch"], "sm_90a");
  EXPECT_EQ(m["shape"], (nlohmann::json{{"K", 200}, {"M", 200}, {"N", 264}}));
  EXPECT_EQ(m["launch"]["block"], (nlohmann::json{256, 1, 1}));
  EXPECT_EQ(m["launch"]["shared_bytes"], 4 * (2 * 128 + 128) * 128 + 1024);
  EXPECT_EQ(m["roofline"]["compute"], "tensor_bf16");
  EXPECT_FALSE(m.contains("cubin_file"));
  EXPECT_FALSE(fs::exists(out / "variant.cubin"));
}

TEST(render_cli, the_best_of_a_search_is_a_cache_hit) {
  register_builtins();
  test::temp_dir tmp;
  test::write_file(tmp.path() / "k.cu",
                   "extern \"C\" __global__ void k(float* y, long long n) { long long i = blockIdx.x * "
                   "(long long)BLOCK + threadIdx.x; if (i < n) y[i] = 2.0f; }\n");
  test::write_file(
      tmp.path() / "kernel.yaml",
      "name: k\nsource: k.cu\nentry: k\nparameters:\n  - {name: BLOCK, values: [64, 128, 256]}\n"
      "arguments:\n  - {name: y, buffer: f32, size: n, role: out}\n  - {name: n, scalar: i64, value: "
      "n}\ngrid: [\"(n + BLOCK - 1) // BLOCK\"]\nblock: [BLOCK]\nshapes:\n  time: [{n: 4096}]\n"
      "reference: baseline\n");
  const std::string worker = (fs::path(KFORGE_CLI).parent_path() / "kforge-worker").string();
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {kernel: kernel.yaml}\nstrategy: brute_force\nevaluator: {type: cuda, params: "
      "{worker: " +
          worker + ", worker_args: [--fake], devices: [0], profile: false, cache_dir: " +
          (tmp.path() / "cache").string() + "}}\noutput: " + (tmp.path() / "run").string() + "\n");
  auto r = test::run_command(std::string(KFORGE_CLI) + " run --quiet " + cfg.string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* block : {"64", "128", "256"}) {
    r = render((tmp.path() / "kernel.yaml").string() + " --config '{\"BLOCK\": " + block + "}' --out " +
               (tmp.path() / (std::string("v") + block)).string() + " --cache " +
               (tmp.path() / "cache").string());
    ASSERT_EQ(r.status, 0) << r.output;
    const auto m = read_json(tmp.path() / (std::string("v") + block) / "variant.json");
    EXPECT_EQ(m["cache_hit"], true) << block;
    EXPECT_EQ(m["launch"]["grid"][0], 4096 / std::stoi(block));
  }
}

TEST(render_cli, mistakes_are_usage_errors_that_say_what_is_wrong) {
  test::temp_dir tmp;
  const auto conv = (test::source_dir() / "experiments/kernels/conv2d/kernel.yaml").string();
  const nlohmann::json good_json = {{"block_size_x", 32},
                                    {"block_size_y", 8},
                                    {"tile_x", 1},
                                    {"tile_y", 1},
                                    {"use_shared", 0},
                                    {"impl", "direct"},
                                    {"unroll_filter_rows", 0},
                                    {"unroll_filter_cols", 0},
                                    {"read_only", "none"},
                                    {"launch_bounds", 0},
                                    {"flags_ptxas", "default"}};
  const auto with = [&](const char* key, const nlohmann::json& v) {
    auto j = good_json;
    j[key] = v;
    return quoted(j.dump());
  };
  const auto good = quoted(good_json.dump());
  auto partial = good_json;
  partial.erase("tile_y");
  const auto out = " --out " + (tmp.path() / "v").string() + " --no-compile";
  struct bad_case {
    std::string args, message;
  };
  const std::vector<bad_case> cases = {
      {conv + out, "--config: missing"},
      {conv + " --config '{}'", "--out: missing"},
      {"--config '{}'" + out, "KERNEL: missing"},
      {conv + " --config 'nope'" + out, "--config: not JSON"},
      {conv + " --config '[1]'" + out, "expected a JSON object"},
      {conv + " --config '{\"blocksize\": 1}'" + out, "--config.blocksize: not a parameter of conv2d"},
      {conv + " --config " + quoted(partial.dump()) + out, "tile_y"},
      {conv + " --config @" + (tmp.path() / "none.json").string() + out, "cannot read"},
      {conv + " --config " + with("block_size_x", 48) + out, "block_size_x"},
      {conv + " --config " + with("block_size_y", 1) + out, "violates a constraint of conv2d"},
      {conv + " --config " + good + out + " --shape check:9", "has 4 check shape(s); index 9"},
      {conv + " --config " + good + out + " --shape '[1]'", "expected a JSON object of problem sizes"},
      {(test::source_dir() / "experiments/kernels-triton/softmax/kernel.yaml").string() + " --config '{}'" +
           out,
       "render writes CUDA kernels"},
  };
  for (const auto& c : cases) {
    const auto r = render(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
  // The good configuration renders.
  const auto r = render(conv + " --config " + good + out);
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace kf
