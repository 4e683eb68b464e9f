// GPU tests of the cuda evaluator (label gpu; scripts/device-test runs them on the H200). Each skips with
// the reason where no GPU is visible.
//   - saxpy reaches >= 85% of the copy bandwidth measured in the same run;
//   - CUDA-event and CUPTI-activity times agree within 2%;
//   - planted variants come back crashed, timeout, invalid/launch_failed and wrong_result, and the run
//     finishes with every correct variant measured;
//   - planted tensor-map faults (experiments/kernels/planted/tma.yaml: wrong dims, an mbarrier that never
//     completes, no map at all, wrong coordinates, a box over the driver's limit) come back as failing
//     trials within the watchdog, and a map the driver refuses (cuTensorMapEncodeTiled) is launch_failed;
//   - every TMA configuration of gemm_bf16's wgmma alternative passes the correctness check;
//   - profiled metrics are plausible (saxpy: DRAM throughput > 60%, SM throughput < 30%);
//   - every suite kernel's baseline and 20 random valid genomes pass the correctness check; the baseline's
//     time and its distance from the roofline floor are printed (SUITE lines).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <map>

#include "evaluators/cuda/protocol.hpp"
#include "evaluators/runner/runner.hpp"

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

std::string worker_path() {
  if (const char* e = std::getenv("KFORGE_WORKER"); e && *e) return e;
  return (std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker").string();
}

// Skips the test unless a GPU is visible.
#define KF_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    const auto r = test::run_command(worker_path() + " --count");                                  \
    if (r.status != 0 || r.output.empty() || r.output[0] == '0')                                   \
      GTEST_SKIP() << "no GPU visible (kforge-worker --count: " << r.output.substr(0, 300) << ")"; \
  } while (0)

// saxpy's plain 20-configuration space (block size x items per thread) at n = 2^28: brute-forced here;
// experiments/kernels/saxpy/kernel.yaml adds the transforms (1680 configurations) for the search.
constexpr const char* kSaxpy = "experiments/kernels/throughput/saxpy-1ms.yaml";

run_result run_kernel(const std::string& kernel, const std::string& strategy, const std::string& extra_params,
                      const test::temp_dir& tmp, const std::string& name, std::size_t evaluations = 0) {
  register_builtins();
  const auto cfg = test::write_file(
      tmp.path() / (name + ".yaml"),
      "problem: {kernel: " + (test::source_dir() / kernel).string() + "}\nstrategy: " + strategy +
          "\nevaluator: {type: cuda, params: {worker: " + worker_path() + extra_params + "}}\n" +
          (evaluations ? "budget: {evaluations: " + std::to_string(evaluations) + "}\n" : std::string()) +
          "output: " + (tmp.path() / name).string() + "\n");
  return run_experiment(load_experiment(cfg.string()), {});
}

TEST(gpu, saxpy_reaches_85_percent_of_copy_bandwidth) {
  KF_REQUIRE_GPU();
  test::temp_dir tmp;
  const auto copy = run_kernel("experiments/kernels/saxpy/copy.yaml", "brute_force", "", tmp, "copy");
  const auto saxpy = run_kernel(kSaxpy, "brute_force", "", tmp, "saxpy");
  ASSERT_NE(copy.history.best(), nullptr);
  ASSERT_NE(saxpy.history.best(), nullptr);
  const double n = 268435456.0;
  const double copy_gbs = 8 * n / (copy.history.best()->time_ms * 1e-3) / 1e9;
  const double saxpy_gbs = 12 * n / (saxpy.history.best()->time_ms * 1e-3) / 1e9;
  std::printf("copy %.1f GB/s (%.4f ms), best saxpy %.1f GB/s (%.4f ms): %.1f%% of copy\n", copy_gbs,
              copy.history.best()->time_ms, saxpy_gbs, saxpy.history.best()->time_ms,
              100 * saxpy_gbs / copy_gbs);
  EXPECT_GE(saxpy_gbs, 0.85 * copy_gbs);
  for (const auto& t : saxpy.history.trials())
    EXPECT_TRUE(t.ok()) << t.error;
}

TEST(gpu, event_and_cupti_activity_times_agree_within_2_percent) {
  KF_REQUIRE_GPU();
  test::temp_dir tmp;
  const auto r = run_kernel(kSaxpy, "random", ", timer: cupti", tmp, "timers", 4);
  ASSERT_EQ(r.history.size(), 4u);
  for (const auto& t : r.history.trials()) {
    ASSERT_TRUE(t.ok()) << t.error;
    // Shapes are numbered check shapes first: the one time shape is shape1 here.
    const auto ev = t.metric("time.events_median_ms.shape1");
    const auto cu = t.metric("time.cupti_median_ms.shape1");
    ASSERT_TRUE(ev && cu) << "timer metrics missing";
    std::printf("events %.4f ms, CUPTI activity %.4f ms: %+.2f%%\n", *ev, *cu, 100 * (*ev - *cu) / *cu);
    EXPECT_LT(std::abs(*ev - *cu) / *cu, 0.02);
  }
}

TEST(gpu, planted_faults_come_back_with_their_status) {
  KF_REQUIRE_GPU();
  test::temp_dir tmp;
  const auto r = run_kernel("experiments/kernels/planted/kernel.yaml", "brute_force",
                            ", watchdog_min_ms: 1500", tmp, "planted");
  ASSERT_EQ(r.history.size(), 18u);  // 6 plants x 3 block sizes: the run finished
  const auto sp =
      load_kernel_problem((test::source_dir() / "experiments/kernels/planted/kernel.yaml").string()).space;
  for (const auto& t : r.history.trials()) {
    const auto plant = sp.value_of(t.cfg, 0).as_int();
    std::printf("PLANT=%lld block=%lld: %s %s\n", static_cast<long long>(plant),
                static_cast<long long>(sp.value_of(t.cfg, 1).as_int()), std::string(to_string(t.st)).c_str(),
                t.error.substr(0, 160).c_str());
    switch (plant) {
      case 0:
        EXPECT_EQ(t.st, status::ok) << t.error;
        break;
      case 1:
        EXPECT_EQ(t.st, status::crashed) << t.error;
        break;
      case 2:
        EXPECT_EQ(t.st, status::timeout) << t.error;
        break;
      case 3:
        EXPECT_TRUE(t.st == status::invalid || t.st == status::launch_failed) << to_string(t.st) << t.error;
        break;
      default:
        EXPECT_EQ(t.st, status::wrong_result) << t.error;
    }
  }
}

// The statuses tma.yaml's comment promises, and a run that finishes: a hung mbarrier wait is a timeout
// of the worker's watchdog (then a fresh worker), never a hung run.
TEST(gpu, planted_tensor_map_faults_come_back_as_failing_trials) {
  KF_REQUIRE_GPU();
  test::temp_dir tmp;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_kernel("experiments/kernels/planted/tma.yaml", "brute_force", ", watchdog_min_ms: 1500",
                            tmp, "planted_tma");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("planted_tma: %zu trials in %.1f s\n", r.history.size(), secs);
  ASSERT_EQ(r.history.size(), 12u);  // 6 plants x 2 block sizes: the run finished
  const auto sp =
      load_kernel_problem((test::source_dir() / "experiments/kernels/planted/tma.yaml").string()).space;
  for (const auto& t : r.history.trials()) {
    const auto plant = sp.value_of(t.cfg, 0).as_int();
    std::printf("PLANT=%lld block=%lld: %s %s\n", static_cast<long long>(plant),
                static_cast<long long>(sp.value_of(t.cfg, 1).as_int()), std::string(to_string(t.st)).c_str(),
                t.error.substr(0, 200).c_str());
    switch (plant) {
      case 0:
        EXPECT_EQ(t.st, status::ok) << t.error;
        break;
      case 1:
        EXPECT_EQ(t.st, status::wrong_result) << t.error;
        break;
      case 2:
        EXPECT_EQ(t.st, status::timeout) << t.error;
        break;
      case 4:  // the H200 raises CUDA_ERROR_ILLEGAL_INSTRUCTION (measured 2026-12-04), see planted_tma.cu
        EXPECT_EQ(t.st, status::crashed) << t.error;
        break;
      case 3:
        EXPECT_TRUE(t.st == status::crashed || t.st == status::launch_failed || t.st == status::timeout)
            << to_string(t.st) << " " << t.error;
        break;
      default:
        EXPECT_EQ(t.st, status::invalid) << t.error;
        EXPECT_NE(t.error.find("box[1] = 512 is not in [1, 256]"), std::string::npos) << t.error;
    }
  }
}

// A layout the description's checks would refuse (a box of 512 rows), sent to a kforge-worker directly as
// the evaluator would: cuTensorMapEncodeTiled refuses it, and the answer is launch_failed naming the map,
// not a crash of the worker.
TEST(gpu, a_tensor_map_the_driver_refuses_is_a_launch_failed_trial) {
  KF_REQUIRE_GPU();
  register_builtins();
  test::temp_dir tmp;
  const auto k = load_kernel_spec((test::source_dir() / "experiments/kernels/planted/tma.yaml").string());
  auto plan = resolve_launch(k, k.defaults, k.time_shapes.front());
  ASSERT_TRUE(plan.args[4].tensor_map && plan.args[4].tensor_map->enabled);
  plan.args[4].tensor_map->box[1] = 512;
  compiler nvrtc(tmp.path() / "nvrtc-cache");
  const auto v = render_variant(k, k.defaults);
  compile_request cr;
  cr.source = v.source;
  cr.name = "planted_tma.cu";
  cr.options = v.options;
  cr.name_expressions = {v.entry};
  cr.arch = "sm_90";
  const auto compiled = nvrtc.compile(cr);
  ASSERT_TRUE(compiled.ok) << compiled.log;
  const auto cubin = tmp.path() / "planted_tma.cubin";
  test::write_file(cubin, std::string(compiled.cubin.begin(), compiled.cubin.end()));

  gpu::evaluate_request req;
  req.id = 1;
  req.candidate = {cubin.string(), compiled.kernels.front().lowered_name};
  gpu::shape_job job;
  job.args = plan.args;
  job.candidate.grid = plan.grid;
  job.candidate.block = plan.block;
  job.candidate.shared_bytes = plan.shared_bytes;
  job.check = false;
  job.time = true;
  req.shapes.push_back(job);

  runner_options o;
  o.command = {worker_path(), "--device", "{device}", "--cache", (tmp.path() / "worker-cache").string()};
  o.log_dir = tmp.path() / "logs";
  o.request_timeout_s = 60;
  std::promise<run_outcome> answered;
  runner pool(o, {[&](run_outcome x) { answered.set_value(std::move(x)); }, nullptr});
  pool.submit(req.id, gpu::to_json(req));
  auto f = answered.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(90)), std::future_status::ready) << "no answer";
  const auto out = f.get();
  ASSERT_FALSE(out.answer.is_null()) << "the worker was lost: " << out.error;
  const auto resp = gpu::response_from_json(out.answer);
  std::printf("%s: %s\n", std::string(to_string(resp.st)).c_str(), resp.error.c_str());
  EXPECT_EQ(resp.st, status::launch_failed) << resp.error;
  EXPECT_NE(resp.error.find("cuTensorMapEncodeTiled for the tensor map tmX"), std::string::npos)
      << resp.error;
  EXPECT_NE(resp.error.find("box [32, 512]"), std::string::npos) << resp.error;
  EXPECT_FALSE(resp.fatal);
}

// Every wgmma configuration with TMA loads (with and without a producer warpgroup; no launch bounds)
// through the cuda evaluator: each check shape against the reference (the aligned one by TMA, the odd
// ones by the element-wise fallback), then a short timing at 4096^3.
TEST(gpu, gemm_bf16_tma_configurations_pass_the_correctness_check) {
  KF_REQUIRE_GPU();
  register_builtins();
  test::temp_dir tmp;
  const auto yaml = test::source_dir() / "experiments/kernels/gemm_bf16/kernel.yaml";
  const auto prob = load_kernel_problem(yaml.string());
  const auto& k = *prob.kernel_desc;
  std::vector<config> configs;
  const auto& valid = k.space.valid();
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const config c = valid.at(i);
    auto val = [&](const char* n) { return k.space.value_of(c, *k.space.param_index(n)).str(); };
    if (val("tensor_core_gemm") == "wgmma" && val("wgmma_tma") == "1" && val("launch_bounds") == "0")
      configs.push_back(c);
  }
  ASSERT_EQ(configs.size(), 76u);
  plugin_spec spec{"cuda", {{"worker", worker_path()}, {"profile", false}, {"max_timing_seconds", 0.3}}, {}};
  auto eval =
      evaluator_registry().create(spec, evaluator_context{prob, yaml.parent_path(), tmp.path() / "tma"});
  std::vector<evaluation_request> reqs;
  for (std::size_t i = 0; i < configs.size(); ++i)
    reqs.push_back({i, configs[i], 0});
  const auto trials = eval.evaluate(reqs);
  ASSERT_EQ(trials.size(), configs.size());
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const auto& t = trials[i];
    std::printf("TMA %s: %s %.4f ms %s\n", k.space.describe(configs[i]).c_str(),
                std::string(to_string(t.st)).c_str(), t.time_ms, t.error.substr(0, 200).c_str());
    EXPECT_EQ(t.st, status::ok) << k.space.describe(configs[i]) << ": " << t.error;
  }
}

TEST(gpu, saxpy_metrics_are_plausible) {
  KF_REQUIRE_GPU();
  test::temp_dir tmp;
  const auto r = run_kernel(kSaxpy, "brute_force", ", deep_profile: true", tmp, "metrics");
  ASSERT_NE(r.history.best(), nullptr);
  // The best variant got the deep metric set too: it was a new best when it ran.
  const auto& t = *r.history.best();
  for (const auto& [k, v] : t.metrics)
    std::printf("  %s = %g\n", k.c_str(), v);
  const auto dram = t.metric("dram__throughput.avg.pct_of_peak_sustained_elapsed");
  const auto sm = t.metric("sm__throughput.avg.pct_of_peak_sustained_elapsed");
  ASSERT_TRUE(dram.has_value()) << "no DRAM throughput metric: profiling unavailable?";
  EXPECT_GT(*dram, 60.0);
  ASSERT_TRUE(sm.has_value()) << "no SM throughput metric (deep set)";
  EXPECT_LT(*sm, 30.0);
  EXPECT_GT(t.sm_clock_mhz, 500.0);
}

TEST(gpu, suite_baselines_and_random_genomes_pass_the_correctness_check) {
  KF_REQUIRE_GPU();
  register_builtins();
  test::temp_dir tmp;
  const auto kernels = test::suite_kernels();
  ASSERT_FALSE(kernels.empty());
  for (const auto& yaml : kernels) {
    const auto name = test::suite_kernel_name(yaml);
    const auto prob = load_kernel_problem(yaml.string());
    const auto& k = *prob.kernel_desc;
    // The first 20 of the genomes CI compiles (tests/unit/kernel_suite_test.cpp); no profiling.
    const auto genomes = test::suite_genomes(k, name, 20);
    plugin_spec spec{
        "cuda", {{"worker", worker_path()}, {"profile", false}, {"max_timing_seconds", 1.0}}, {}};
    auto eval =
        evaluator_registry().create(spec, evaluator_context{prob, yaml.parent_path(), tmp.path() / name});
    std::vector<evaluation_request> reqs;
    for (std::size_t i = 0; i < genomes.size(); ++i)
      reqs.push_back({i, genomes[i], 0});
    const auto trials = eval.evaluate(reqs);
    ASSERT_EQ(trials.size(), genomes.size()) << name;
    std::map<std::string, int> statuses;
    double best = trial::nan;
    for (std::size_t i = 0; i < trials.size(); ++i) {
      const auto& t = trials[i];
      ++statuses[std::string(to_string(t.st))];
      EXPECT_EQ(t.st, status::ok) << name << (i == 0 ? " baseline " : " genome ")
                                  << prob.space.describe(t.cfg) << ": " << t.error.substr(0, 400);
      if (t.ok() && !(t.time_ms >= best)) best = t.time_ms;
    }
    const auto& base = trials.front();
    const auto rb = roofline(k, k.defaults, k.time_shapes.front());
    const double floor_ms = roofline_floor_ms(k, rb, h200_peaks);
    std::string st;
    for (const auto& [s, n] : statuses)
      st += (st.empty() ? "" : " ") + s + "=" + std::to_string(n);
    std::printf(
        "SUITE %-10s baseline %9.4f ms (IQR %.4f)  floor %8.4f ms (%s-bound)  baseline/floor %6.2fx  "
        "best of 20 genomes %9.4f ms  [%s]\n",
        name.c_str(), base.time_ms, base.time_iqr_ms, floor_ms,
        rb.bytes.value_or(0) / h200_peaks.dram_bytes_per_s * 1e3 >= floor_ms ? "memory" : "compute",
        base.time_ms / floor_ms, best, st.c_str());
  }
}

}  // namespace
}  // namespace kf
