// What researchers expect of the report: the run's strategy, seed, budget and config, how it ended,
// failure messages, the best against the recording's optimum on replay; --json on run, report, space and
// plugins; `kforge runs` and `kforge compare`.
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

// A recorded space of six configurations: two fail (one with a compiler log), the optimum is x=5.
std::filesystem::path write_recording(const std::filesystem::path& dir) {
  return test::write_file(dir / "rec.json", R"({"device_name": "GPU", "kernel_name": "k",
"tune_params_keys": ["x"], "tune_params": {"x": [1, 2, 3, 4, 5, 6]},
"cache": {
"1": {"x": 1, "time": 2.0, "times": [2.0], "compile_time": 100},
"2": {"x": 2, "time": "CompilationFailedConfig", "error": "kernel.cu(3): error: expected a ';'", "compile_time": 50},
"3": {"x": 3, "time": "RuntimeFailedConfig", "compile_time": 100},
"4": {"x": 4, "time": 1.5, "times": [1.5], "compile_time": 100},
"5": {"x": 5, "time": 0.5, "times": [0.5], "compile_time": 100},
"6": {"x": 6, "time": 0.9, "times": [0.9], "compile_time": 100}}})");
}

std::filesystem::path write_config(const std::filesystem::path& dir, const std::string& strategy, int seed,
                                   int evaluations, const std::string& out) {
  const auto rec = write_recording(dir).string();
  return test::write_file(dir / (out + ".yaml"),
                          "name: six\nproblem: {cache: " + rec + "}\nstrategy: " + strategy +
                              "\nevaluator: {type: replay, params: {file: " + rec +
                              "}}\nbudget: {evaluations: " + std::to_string(evaluations) + "}\nseed: " +
                              std::to_string(seed) + "\noutput: " + (dir / out).string() + "\n");
}

TEST(report, shows_config_strategy_seed_budget_end_failures_and_the_recorded_optimum) {
  test::temp_dir tmp;
  const auto cfg = write_config(tmp.path(), "brute_force", 5, 6, "run");
  auto r = test::run_command(kforge + " run --quiet " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command(kforge + " report " + (tmp.path() / "run").string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string& words : std::vector<std::string>{
           "6 trials, finished: evaluation budget reached", "config: " + cfg.string(), "strategy brute_force",
           "seed 5", "budget 6 evaluations", "recorded optimum: 0.5000 ms {\"x\": 5}",
           "best / optimum = 1.000 (found)", "compile_failed (1):", "kernel.cu(3): error: expected a ';'",
           "launch_failed (1):", "trial 2 {x=3}: recorded as RuntimeFailedConfig"})
    EXPECT_NE(r.output.find(words), std::string::npos) << "missing '" << words << "' in\n" << r.output;
}

TEST(report, json_on_run_report_space_and_plugins) {
  test::temp_dir tmp;
  const auto cfg = write_config(tmp.path(), "random", 2, 4, "run");
  auto r = test::run_command("(" + kforge + " run --json " + cfg.string() + " 2>/dev/null)");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["trials"], 4);
  EXPECT_EQ(j["folder"], (tmp.path() / "run").string());
  EXPECT_TRUE(j["best"].is_object());
  r = test::run_command(kforge + " report --json " + (tmp.path() / "run").string());
  ASSERT_EQ(r.status, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["strategy"]["type"], "random");
  EXPECT_EQ(j[0]["seed"], 2);
  EXPECT_EQ(j[0]["budget"]["evaluations"], 4);
  EXPECT_EQ(j[0]["state"], "finished");
  EXPECT_EQ(j[0]["recorded_optimum"]["time_ms"], 0.5);
  EXPECT_FALSE(j[0]["convergence"].empty());
  r = test::run_command(kforge + " space --json --list 2 " + (tmp.path() / "rec.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["valid"], 6);
  EXPECT_EQ(j["list"].size(), 2u);
  r = test::run_command(kforge + " plugins --json");
  ASSERT_EQ(r.status, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_FALSE(j["strategies"].empty());
  EXPECT_FALSE(j["evaluators"].empty());
}

TEST(report, runs_lists_and_compare_puts_runs_side_by_side) {
  test::temp_dir tmp;
  std::filesystem::create_directories(tmp.path() / "runs");
  for (int seed : {1, 2}) {
    const auto cfg = write_config(tmp.path(), "random", seed, 3, "runs/r" + std::to_string(seed));
    ASSERT_EQ(test::run_command(kforge + " run --quiet " + cfg.string()).status, 0);
  }
  const auto bf = write_config(tmp.path(), "brute_force", 1, 6, "runs/bf");
  ASSERT_EQ(test::run_command(kforge + " run --quiet " + bf.string()).status, 0);
  auto r = test::run_command("cd " + tmp.path().string() + " && " + kforge + " runs");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* words : {"folder", "strategy", "seed", "trials", "best (ms)", "bf ", "brute_force", "r1 ",
                            "r2 ", "finished: evaluation budget reached"})
    EXPECT_NE(r.output.find(words), std::string::npos) << words << " in\n" << r.output;
  r = test::run_command(kforge + " compare " + (tmp.path() / "runs/bf").string() + " " +
                        (tmp.path() / "runs/r1").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(
                "| run | strategy | seed | trials | best (ms) | vs best | time to 95% | trials to 95% | ok | "
                "compile_failed | launch_failed |"),
            std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find("| " + (tmp.path() / "runs/bf").string() + " | brute_force | 1 | 6 | 0.5000 | 1.000x | "),
      std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kf
