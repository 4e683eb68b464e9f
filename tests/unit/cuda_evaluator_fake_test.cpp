// The cuda evaluator's driver side on a machine without a GPU: real NVRTC compiles, real worker
// processes (kforge-worker --fake, which answers without a device and crashes, hangs or dies on cue).
// Checks that every failure becomes a trial with the right status, that dead workers are replaced and
// the run goes on, and that several workers share one queue.
#include <gtest/gtest.h>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const char* source = R"CUDA(
extern "C" __global__ void k_ok(float* y, long long n) { long long i = blockIdx.x * 64ll + threadIdx.x; if (i < n) y[i] = 1.0f; }
extern "C" __global__ void k_ok2(float* y, long long n) { long long i = blockIdx.x * 64ll + threadIdx.x; if (i < n) y[i] = 1.0f; }
extern "C" __global__ void k_crash(float* y, long long n) { if (n < 0) y[0] = 0; }
extern "C" __global__ void k_hang(float* y, long long n) { if (n < 0) y[0] = 0; }
extern "C" __global__ void k_fatal(float* y, long long n) { if (n < 0) y[0] = 0; }
extern "C" __global__ void k_big(float* y, long long n) { if (n < 0) y[0] = 0; }
)CUDA";

const char* kernel_yaml = R"YAML(
name: fake
source: fake.cu
entry: "{variant}"
injection: template
parameters:
  - {name: variant, values: [k_ok, k_ok2, k_crash, k_hang, k_fatal, k_missing, k_big], default: k_ok}
arguments:
  - {name: y, buffer: f32, size: n, role: out}
  - {name: n, scalar: i64, value: n}
grid: ["(n + 63) // 64"]
block: ["2048 if variant == 'k_big' else 64"]
shapes:
  time: [{n: 4096}]
  check: [{n: 100}]
reference: {entry: k_ok}
)YAML";

/// Writes the fake kernel, its description and an experiment config into `tmp`: brute force over the
/// variants on fake workers with `worker_params` (the cuda evaluator's params besides worker, profile and
/// cache_dir), `batch_size` proposals at a time. Returns the config's path.
std::filesystem::path write_fake_experiment(const test::temp_dir& tmp, const std::string& worker_params,
                                            int batch_size) {
  test::write_file(tmp.path() / "fake.cu", source);
  test::write_file(tmp.path() / "kernel.yaml", kernel_yaml);
  const std::string worker = std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker";
  return test::write_file(
      tmp.path() / "e.yaml",
      "problem: {kernel: kernel.yaml}\nstrategy: brute_force\nevaluator: {type: cuda, params: "
      "{worker: " +
          worker + ", " + worker_params + ", profile: false, cache_dir: " + (tmp.path() / "cache").string() +
          "}}\nbatch_size: " + std::to_string(batch_size) + "\noutput: " + (tmp.path() / "run").string() +
          "\n");
}

TEST(cuda_evaluator_fake, every_failure_is_a_trial_and_workers_come_back) {
  register_builtins();
  test::temp_dir tmp;
  const auto cfg = write_fake_experiment(
      tmp, "worker_args: [--fake, --fake-ms, '20'], devices: [0, 1], request_timeout_s: 2", 4);
  const auto spec = load_experiment(cfg.string());
  run_options o;
  const auto res = run_experiment(spec, o);
  ASSERT_EQ(res.history.size(), 7u);
  std::map<std::string, status> by_variant;
  for (const auto& t : res.history.trials())
    by_variant[spec.prob.space.value_of(t.cfg, 0).as_string()] = t.st;
  EXPECT_EQ(by_variant["k_ok"], status::ok);
  EXPECT_EQ(by_variant["k_ok2"], status::ok);
  EXPECT_EQ(by_variant["k_crash"], status::crashed);
  EXPECT_EQ(by_variant["k_hang"], status::timeout);
  EXPECT_EQ(by_variant["k_fatal"], status::crashed);
  EXPECT_EQ(by_variant["k_missing"], status::compile_failed);
  EXPECT_EQ(by_variant["k_big"], status::invalid);
  for (const auto& t : res.history.trials()) {
    if (t.ok()) {
      EXPECT_GT(t.time_ms, 0.0);
      EXPECT_TRUE(t.metrics.count("static.registers"));
      EXPECT_EQ(t.device.rfind("cuda:", 0), 0u) << t.device;
    } else {
      EXPECT_FALSE(t.error.empty()) << to_string(t.st);
    }
  }
  // The workers that crashed, hung or died were replaced: the last trials still ran.
  run_store st(tmp.path() / "run");
  const auto ev = st.meta("evaluator");
  int restarts = 0;
  for (const auto& w : ev["workers"])
    restarts += w["restarts"].get<int>();
  EXPECT_GE(restarts, 3) << ev.dump();
}

TEST(cuda_evaluator_fake, a_variant_whose_worker_dies_unannounced_is_retried_once) {
  register_builtins();
  test::temp_dir tmp;
  // Each worker process dies unannounced on its third request, one device, one variant at a time: the
  // good variants must still come back ok (retried on a fresh worker); k_crash, which kills its worker
  // on every attempt, is crashed after its retry; k_hang is a timeout (not retried).
  const auto cfg = write_fake_experiment(
      tmp, "worker_args: [--fake, --fake-die-after, '2'], devices: [0], request_timeout_s: 2", 1);
  const auto spec = load_experiment(cfg.string());
  const auto res = run_experiment(spec, {});
  ASSERT_EQ(res.history.size(), 7u);
  int ok = 0, retried = 0, crashed = 0;
  for (const auto& t : res.history.trials()) {
    const auto v = spec.prob.space.value_of(t.cfg, 0).as_string();
    if (v == "k_ok" || v == "k_ok2") {
      EXPECT_EQ(t.st, status::ok) << v << ": " << t.error;
      ok += t.ok();
    }
    if (v == "k_crash") crashed += t.st == status::crashed;
    if (v == "k_hang") {
      EXPECT_EQ(t.st, status::timeout);
    }
    if (t.metric("worker_losses")) ++retried;
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(crashed, 1);
  EXPECT_GE(retried, 1);
}

TEST(cuda_evaluator_fake, a_descriptions_arch_overrides_the_evaluators) {
  register_builtins();
  test::temp_dir tmp;
  // A kernel that compiles only for sm_90a (as gemm_bf16's wgmma alternative): with `arch: sm_90a` in its
  // description every variant and the reference compile although the evaluator's arch is sm_90; the run
  // records the architecture actually compiled for.
  test::write_file(tmp.path() / "a.cu", R"CUDA(
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "needs sm_90a"
#endif
extern "C" __global__ void k(float* y, long long n) { long long i = blockIdx.x * (long long)B + threadIdx.x; if (i < n) y[i] = 1.0f; }
)CUDA");
  test::write_file(tmp.path() / "kernel.yaml", R"YAML(
name: arch_a
source: a.cu
entry: k
arch: sm_90a
parameters:
  - {name: B, values: [64, 128], default: 64}
arguments:
  - {name: y, buffer: f32, size: n, role: out}
  - {name: n, scalar: i64, value: n}
grid: ["(n + B - 1) // B"]
block: [B]
shapes:
  time: [{n: 4096}]
)YAML");
  const std::string worker = std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker";
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {kernel: kernel.yaml}\nstrategy: brute_force\nevaluator: {type: cuda, params: {worker: " +
          worker + ", worker_args: [--fake], devices: [0], arch: sm_90, profile: false, cache_dir: " +
          (tmp.path() / "cache").string() + "}}\noutput: " + (tmp.path() / "run").string() + "\n");
  const auto spec = load_experiment(cfg.string());
  EXPECT_EQ(spec.prob.kernel_desc->arch, "sm_90a");
  const auto res = run_experiment(spec, {});
  ASSERT_EQ(res.history.size(), 2u);
  for (const auto& t : res.history.trials())
    EXPECT_EQ(t.st, status::ok) << t.error;
  EXPECT_EQ(run_store(tmp.path() / "run").meta("evaluator").value("arch", ""), "sm_90a");

  // Not a real architecture, or a Triton kernel: configuration errors naming the key.
  auto fails = [&](const std::string& yaml, const std::string& part) {
    test::write_file(tmp.path() / "bad.yaml", yaml);
    try {
      load_kernel_spec((tmp.path() / "bad.yaml").string());
      ADD_FAILURE() << "accepted:\n" << yaml;
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const std::string rest =
      "arguments: [{name: y, buffer: f32, size: 4, role: out}]\ngrid: [1]\nshapes: {time: [{n: 1}]}\n";
  fails("source: a.cu\nentry: k\narch: compute_90a\nblock: [1]\n" + rest, "expected a real architecture");
  fails("source: a.cu\nentry: k\narch: 90\nblock: [1]\n" + rest, "expected a real architecture");
  test::write_file(tmp.path() / "t.py", "import triton\n");
  fails("source: t.py\nentry: k\nlanguage: triton\narch: sm_90a\n" + rest, "Triton");
}

}  // namespace
}  // namespace kf
