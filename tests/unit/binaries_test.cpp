// Every kforge program must start on a machine without an NVIDIA driver: none may need libcuda.so.1 at
// load time (evaluators/cuda/worker/driver_api.cpp loads it at run time, and only when a GPU is asked for).
#include <gtest/gtest.h>
#include <filesystem>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace {

TEST(binaries, none_needs_the_cuda_driver_at_load_time) {
  const std::string dir = std::filesystem::path(KFORGE_CLI).parent_path().string();
  // libkforge_core.so too (every program loads it); libkforge_python.so, loaded only for python strategies,
  // where it was built.
  std::vector<std::string> files = {dir + "/kforge", dir + "/kforge-worker", std::string("/proc/self/exe"),
                                    dir + "/libkforge_core.so"};
  if (std::filesystem::exists(dir + "/libkforge_python.so")) files.push_back(dir + "/libkforge_python.so");
  for (const std::string& bin : files) {
    const auto r = kf::test::run_command("readelf -d " + bin);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("NEEDED"), std::string::npos) << bin;
    EXPECT_EQ(r.output.find("libcuda"), std::string::npos) << bin << " links the CUDA driver:\n" << r.output;
  }
  // The CLI links no Python: it loads libkforge_python.so when a python strategy is asked for.
  const auto cli = kf::test::run_command("readelf -d " + dir + "/kforge " + dir + "/libkforge_core.so");
  EXPECT_EQ(cli.output.find("libpython"), std::string::npos) << cli.output;
  // And the worker starts, and says so, where no driver is.
  const auto w = kf::test::run_command(dir + "/kforge-worker --fake < /dev/null");
  EXPECT_EQ(w.status, 0) << w.output;
}

}  // namespace

namespace {

TEST(binaries, run_devices_flag_is_checked) {
  const std::string kforge = KFORGE_CLI;
  // The embedded default replays: GPUs do not apply.
  auto r = kf::test::run_command(kforge + " run --devices 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--devices"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("only the cuda evaluator"), std::string::npos) << r.output;
  // A cuda experiment on two fake workers: the flag picks the devices, and a malformed list is refused.
  kf::test::temp_dir tmp;
  const auto cfg = kf::test::write_file(
      tmp.path() / "e.yaml",
      "problem: {kernel: " + (kf::test::source_dir() / "experiments/kernels/saxpy/kernel.yaml").string() +
          "}\nstrategy: random\nevaluator: {type: cuda, params: {worker: " +
          (std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker").string() +
          ", worker_args: [--fake], profile: false, cache_dir: " + (tmp.path() / "cache").string() +
          "}}\nbudget: {evaluations: 3}\noutput: " + (tmp.path() / "run").string() + "\n");
  r = kf::test::run_command(kforge + " run --quiet --devices 0,x " + cfg.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("expected GPU indices"), std::string::npos) << r.output;
  r = kf::test::run_command(kforge + " run --quiet --devices 0,1 " + cfg.string());
  EXPECT_EQ(r.status, 0) << r.output;
  // One worker per named device (their logs are named after them).
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "run/workers/worker-gpu0-0.log"));
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "run/workers/worker-gpu1-0.log"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "run/workers/worker-gpu2-0.log"));
}

}  // namespace
