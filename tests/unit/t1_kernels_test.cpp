// T1 files' kernels run by the cuda evaluator (src/config/t1_kernel.cpp): Kernel Tuner's meaning of the
// format (grid divisors, max(param) sizes, __constant__ arguments, defines), the experiment's corrections,
// clear refusals, and benchmark_hub's CUDA kernels compiled for sm_90 and run end to end on fake workers.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>

#include "evaluators/cuda/builder.hpp"
#include "evaluators/cuda/protocol.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/recorded.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

// experiments/benchmark_hub/<name>.yaml with its ../../../shared/data paths pointed at the shared data
// found here, written into `dir`.
std::filesystem::path shipped_config(const std::string& name, const std::filesystem::path& shared,
                                     const std::filesystem::path& dir, const std::string& extra = "") {
  std::ifstream in(test::source_dir() / "experiments/benchmark_hub" / (name + ".yaml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(text.empty()) << name;
  const std::string from = "../../../shared/data";
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at))
    text.replace(at, from.size(), shared.string());
  return test::write_file(dir / (name + ".yaml"), text + extra);
}

// A small T1 file with its kernel, for the rules.
const char* small_kernel = R"CUDA(
__constant__ float coeff[8];
extern "C" __global__ void scale(float* out, const float* in, const float* coeff_arg, int n) {
  int i = blockIdx.x * block_size_x * tile + threadIdx.x;
  #pragma unroll loop_unroll_factor_i
  for (int t = 0; t < tile; ++t, i += block_size_x)
    if (i < n) out[i] = in[i] * coeff[i % 8] + grid_size_x * 0 + kernel_tuner * 0;
}
)CUDA";

std::string small_t1(const std::string& kernel_spec_extra, const std::string& grid) {
  return R"J({
 "ConfigurationSpace": {
  "TuningParameters": [
   {"Name": "block_size_x", "Type": "int", "Values": "[32, 64, 128]", "Default": 64},
   {"Name": "tile", "Type": "int", "Values": "[1, 2, 4]", "Default": 1},
   {"Name": "loop_unroll_factor_i", "Type": "int", "Values": "[0, 1]", "Default": 0},
   {"Name": "pad", "Type": "int", "Values": "[0, 16]", "Default": 16}],
  "Conditions": [{"Expression": "block_size_x * tile <= 256", "Parameters": ["block_size_x", "tile"]}]},
 "KernelSpecification": {
  "Language": "CUDA", "KernelName": "scale", "KernelFile": "scale.cu", "CompilerOptions": ["-std=c++17"],
  "LocalSize": {"X": "block_size_x", "Y": "1", "Z": "1"},
  "ProblemSize": [10000], )J" +
         grid + R"J(
  "Arguments": [
   {"Name": "out", "Type": "float", "MemoryType": "Vector", "AccessType": "WriteOnly", "Size": "ProblemSize[0]", "Output": 1},
   {"Name": "in", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0] + max(pad)", "FillType": "Random", "FillValue": 2.0},
   {"Name": "coeff", "Type": "float", "MemoryType": "Vector", "MemType": "Constant", "AccessType": "ReadOnly", "Size": 8, "FillType": "Constant", "FillValue": 0.5},
   {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 10000})J" +
         kernel_spec_extra + R"J(]}})J";
}

problem load_with(const test::temp_dir& tmp, const std::string& t1, const std::string& problem_extra = "") {
  test::write_file(tmp.path() / "scale.cu", small_kernel);
  test::write_file(tmp.path() / "T1.json", t1);
  const auto cfg = test::write_file(tmp.path() / "e.yaml", "problem: {t1: T1.json" + problem_extra +
                                                               "}\nstrategy: random\nevaluator: cuda\n");
  return load_experiment(cfg.string()).prob;
}

std::uint64_t launch_grid_x(const kernel_spec& k, const std::map<std::string, int>& values) {
  std::map<std::string, value, std::less<>> v;
  for (const auto& [n, x] : values)
    v.emplace(n, value(x));
  return resolve_launch(k, k.space.from_values(v), k.time_shapes.front()).grid[0];
}

TEST(t1_kernels, grid_divisors_sizes_constants_and_defines_follow_kernel_tuner) {
  register_builtins();
  test::temp_dir tmp;
  const auto p = load_with(tmp, small_t1("", R"("GridDivX": ["block_size_x", "tile"],)"));
  ASSERT_TRUE(p.kernel_desc) << "kernel not attached";
  const auto& k = *p.kernel_desc;
  // grid = ceil(10000 / (block_size_x * tile)).
  EXPECT_EQ(launch_grid_x(k, {{"block_size_x", 64}, {"tile", 2}, {"loop_unroll_factor_i", 0}, {"pad", 0}}),
            79u);
  EXPECT_EQ(launch_grid_x(k, {{"block_size_x", 128}, {"tile", 1}, {"loop_unroll_factor_i", 0}, {"pad", 0}}),
            79u);
  const auto plan = resolve_launch(k, k.defaults, k.time_shapes.front());
  ASSERT_EQ(plan.args.size(), 4u);
  EXPECT_EQ(plan.args[1].count, 10016u);  // ProblemSize[0] + max(pad)
  EXPECT_TRUE(plan.args[2].constant);
  EXPECT_TRUE(plan.args[2].param);
  EXPECT_TRUE(plan.args[0].compare);
  EXPECT_EQ(plan.args[0].role, arg_role::out);
  EXPECT_FALSE(plan.args[3].buffer);
  EXPECT_EQ(plan.args[3].scalar_int, 10000);
  // Defaults from T1's Default; Random fills in [0, FillValue).
  EXPECT_EQ(k.space.describe(k.defaults), "{block_size_x=64, tile=1, loop_unroll_factor_i=0, pad=16}");
  EXPECT_EQ(plan.args[1].fill.k, fill_spec::kind::uniform);
  EXPECT_DOUBLE_EQ(plan.args[1].fill.b, 2.0);
  // Defines: grid_size_x, kernel_tuner; the unroll pragma of a zero factor is removed (its line kept).
  const auto v = render_variant(k, k.defaults);
  EXPECT_NE(v.source.find("#define grid_size_x 157"), std::string::npos);
  EXPECT_NE(v.source.find("#define kernel_tuner 1"), std::string::npos);
  EXPECT_EQ(v.source.find("#pragma unroll loop_unroll_factor_i"), std::string::npos);
  std::map<std::string, value, std::less<>> one{
      {"block_size_x", value(64)}, {"tile", value(1)}, {"loop_unroll_factor_i", value(1)}, {"pad", value(0)}};
  EXPECT_NE(render_variant(k, k.space.from_values(one)).source.find("#pragma unroll loop_unroll_factor_i"),
            std::string::npos);
  // It compiles with NVRTC, the __constant__ symbol and the C++ entry included.
  compiler c;
  compile_request r{v.source, "scale.cu", v.options, {v.entry}, "sm_90", {}};
  const auto res = c.compile(r);
  EXPECT_TRUE(res.ok) << res.log;
}

TEST(t1_kernels, without_grid_divisors_the_global_size_decides) {
  register_builtins();
  test::temp_dir tmp;
  const auto threads = load_with(tmp, small_t1("", R"("GlobalSize": {"X": "10000"},)"));
  EXPECT_EQ(launch_grid_x(*threads.kernel_desc,
                          {{"block_size_x", 64}, {"tile", 1}, {"loop_unroll_factor_i", 0}, {"pad", 0}}),
            157u);  // OpenCL-style: threads
  const auto blocks = load_with(
      tmp, small_t1("", R"("GlobalSizeType": "CUDA", "GlobalSize": {"X": "10000 // block_size_x"},)"));
  EXPECT_EQ(launch_grid_x(*blocks.kernel_desc,
                          {{"block_size_x", 64}, {"tile", 1}, {"loop_unroll_factor_i", 0}, {"pad", 0}}),
            156u);  // CUDA-style: blocks
}

TEST(t1_kernels, the_experiment_corrects_arguments_and_names_the_reference) {
  register_builtins();
  test::temp_dir tmp;
  const auto p = load_with(
      tmp, small_t1("", R"("GridDivX": ["block_size_x", "tile"],)"),
      ", reference: baseline, tolerance: {f32: {rel: 0.001}}, arguments: {in: {type: f16, size: 20000, "
      "fill: {uniform: [-1, 1]}}, coeff: {constant: false}, out: {compare: true}}");
  const auto& k = *p.kernel_desc;
  EXPECT_EQ(k.reference.k, reference_spec::kind::baseline);
  EXPECT_DOUBLE_EQ(k.tolerances.at(dtype::f32).rel, 0.001);
  const auto plan = resolve_launch(k, k.defaults, k.time_shapes.front());
  EXPECT_EQ(plan.args[1].type, dtype::f16);
  EXPECT_EQ(plan.args[1].count, 20000u);
  EXPECT_DOUBLE_EQ(plan.args[1].fill.a, -1.0);
  EXPECT_FALSE(plan.args[2].constant);
}

TEST(t1_kernels, what_kforge_cannot_honour_is_an_error_naming_the_file_and_key) {
  register_builtins();
  test::temp_dir tmp;
  auto message_of = [&](const std::string& t1, const std::string& extra) {
    try {
      (void)load_with(tmp, t1, extra);
    } catch (const config_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const auto divs = R"("GridDivX": ["block_size_x", "tile"],)";
  // A correction naming an argument that does not exist.
  EXPECT_NE(message_of(small_t1("", divs), ", arguments: {nope: {size: 3}}").find("problem.arguments.nope"),
            std::string::npos);
  // Local memory arguments; unsupported fills; OpenCL without a prelude; a HIP source.
  const auto local =
      message_of(small_t1(R"(, {"Name": "tmp", "Type": "float", "MemoryType": "Local", "Size": 4})", divs),
                 ", reference: baseline");
  EXPECT_NE(local.find("Arguments[4].MemoryType"), std::string::npos) << local;
  EXPECT_NE(local.find("T1.json"), std::string::npos) << local;
  const auto fill = message_of(
      small_t1(
          R"(, {"Name": "x", "Type": "float", "MemoryType": "Vector", "Size": 4, "FillType": "BinaryRaw"})",
          divs),
      ", reference: baseline");
  EXPECT_NE(fill.find("Arguments[4].FillType"), std::string::npos) << fill;
  std::string opencl = small_t1("", divs);
  opencl.replace(opencl.find("\"CUDA\""), 6, "\"OpenCL\"");
  const auto ocl = message_of(opencl, ", reference: baseline");
  EXPECT_NE(ocl.find("OpenCL kernels are not supported by the cuda evaluator"), std::string::npos) << ocl;
  test::write_file(tmp.path() / "scale.hip", std::string("#include \"hip/hip_runtime.h\"\n") + small_kernel);
  const auto hip = message_of(small_t1("", divs), ", kernel_file: scale.hip");
  EXPECT_NE(hip.find("HIP source"), std::string::npos) << hip;
  // Without corrections a T1 problem still loads (replay needs no kernel); the cuda evaluator then
  // raises the kernel's error.
  test::write_file(tmp.path() / "T1.json", opencl);
  const auto p = load_experiment(
      test::write_file(tmp.path() / "r.yaml", "problem: {t1: T1.json}\nstrategy: random\nevaluator: cuda\n")
          .string());
  EXPECT_FALSE(p.prob.kernel_desc);
  EXPECT_TRUE(p.prob.kernel_error);
}

TEST(t1_kernels, benchmark_hub_cuda_kernels_load_and_compile_for_sm_90) {
  KF_REQUIRE_SHARED_DATA(shared);
  register_builtins();
  test::temp_dir tmp;
  const std::map<std::string, std::size_t> valid = {
      {"convolution", 4362}, {"dedispersion", 11130}, {"hotspot", 82984}};
  for (const auto& [name, n_valid] : valid) {
    const auto spec = load_experiment(shipped_config(name, shared, tmp.path()).string());
    ASSERT_TRUE(spec.prob.kernel_desc) << name;
    const auto k = spec.prob.kernel_desc;
    EXPECT_EQ(k->space.valid().size(), n_valid) << name;
    // The baseline and 20 random valid configurations compile (the builder's pool, two threads), and so
    // does the reference (the builder's constructor compiles it).
    nvrtc_builder_options o;
    o.cache_dir = tmp.path() / "cache";
    o.threads = 2;
    o.static_filter = false;
    auto b = make_nvrtc_builder(k, o, device_limits{});
    const auto genomes = test::suite_genomes(*k, name, 20);
    std::size_t ok = 0, sent = 0;
    for (std::size_t got = 0; got < genomes.size();) {
      // submit() blocks while the builder is full: keep a few in flight from this one thread.
      while (sent < genomes.size() && b->pending() < 4) {
        b->submit(sent, genomes[sent], sent + 1);
        ++sent;
      }
      auto r = b->take(std::chrono::milliseconds(100));
      if (!r) continue;
      ++got;
      // The one failure the T1 conditions allow: benchmark_hub's convolution_milo.cu declares its shared
      // tile whatever use_shmem says, and a tile over 48 KiB of static shared memory cannot compile.
      const bool shared_too_big = r->st == status::compile_failed &&
                                  r->error.find("uses too much shared data") != std::string::npos &&
                                  name == "convolution" && r->id != 0;
      if (!shared_too_big) {
        EXPECT_EQ(r->st, status::ok) << name << " " << k->space.describe(genomes[r->id]) << ": "
                                     << r->error.substr(r->error.size() > 800 ? r->error.size() - 800 : 0);
      }
      ok += r->st == status::ok || shared_too_big;
      if (r->st == status::ok) {
        EXPECT_FALSE(r->image.function.empty());
        EXPECT_TRUE(std::filesystem::exists(r->image.path));
      }
    }
    EXPECT_EQ(ok, genomes.size()) << name;
    EXPECT_TRUE(b->reference().has_value()) << name;
  }
  // The recordings' keys are the T1 files' valid sets (also checked in tests/replay/recorded_spaces_test).
  const auto conv = load_experiment(shipped_config("convolution", shared, tmp.path()).string());
  const auto rec =
      load_recorded_cached((shared / "tuning-spaces/benchmark_hub/convolution/A100.json.gz").string());
  const auto bound = bind_records(*rec, conv.prob.space);
  EXPECT_EQ(bound.unmatched, 0u);
  EXPECT_EQ(bound.entries.size(), conv.prob.space.valid().size());
}

TEST(t1_kernels, a_config_naming_only_the_convolution_t1_file_runs_end_to_end_on_fake_workers) {
  KF_REQUIRE_SHARED_DATA(shared);
  test::temp_dir tmp;
  const std::string worker = (std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker").string();
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {t1: " + (shared / "tuning-spaces/benchmark_hub/convolution/T1.json").string() +
          "}\nstrategy: hybrid\nevaluator: {type: cuda, params: {worker: " + worker +
          ", worker_args: [--fake], devices: [0], compile_threads: 2, cache_dir: " +
          (tmp.path() / "cache").string() +
          "}}\nbudget: {evaluations: 6}\noutput: " + (tmp.path() / "run").string() + "\n");
  const auto r = test::run_command(std::string(KFORGE_CLI) + " run --quiet " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("after 6 trials"), std::string::npos) << r.output;
  const auto e = test::run_command(std::string(KFORGE_CLI) + " export " + (tmp.path() / "run").string() +
                                   " --format csv");
  std::size_t ok = 0;
  for (auto at = e.output.find(",ok,"); at != std::string::npos; at = e.output.find(",ok,", at + 1))
    ++ok;
  EXPECT_GE(ok, 3u) << e.output;
}

TEST(t1_kernels, constant_arguments_travel_in_the_protocol) {
  gpu::evaluate_request r;
  r.candidate = {"a.cubin", "k"};
  gpu::shape_job s;
  resolved_arg a;
  a.name = "d_filter";
  a.constant = true;
  a.param = false;
  a.count = 225;
  s.args.push_back(a);
  resolved_arg o;
  o.name = "out";
  o.role = arg_role::out;
  o.compare = false;
  o.count = 4;
  s.args.push_back(o);
  r.shapes.push_back(s);
  const auto back = gpu::request_from_json(gpu::to_json(r));
  ASSERT_EQ(back.shapes.at(0).args.size(), 2u);
  EXPECT_EQ(back.shapes[0].args[0].name, "d_filter");
  EXPECT_TRUE(back.shapes[0].args[0].constant);
  EXPECT_FALSE(back.shapes[0].args[0].param);
  EXPECT_FALSE(back.shapes[0].args[1].compare);
  EXPECT_FALSE(back.reference.has_value());
}

}  // namespace
}  // namespace kf
