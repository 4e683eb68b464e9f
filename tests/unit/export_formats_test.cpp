// The Kernel Tuner and T4 exports in the layouts their tools write: Kernel Tuner's cache file (header
// fields in its order, `cache` last, closed by "}\n}"), `time` per each format's own definition (the
// mean of the runs) beside kforge's objective (`time_median`), timestamps; and Kernel Tuner 1.5.0
// itself loading the export in simulation mode and finding kforge's best configuration.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

search_space two_param_space() {
  std::vector<param> ps;
  ps.push_back(make_param("bx", param_type::integer, {32, 64, 128}));
  ps.push_back(make_param("mode", param_type::string, {"plain", "shared"}));
  return search_space(std::move(ps), {});
}

std::vector<trial> two_trials() {
  trial a;
  a.sequence = 0;
  a.cfg = {0, 1};
  a.st = status::ok;
  a.times_ms = {1.0, 1.1, 1.9};  // median 1.1, mean 1.333...
  a.time_ms = 1.1;
  a.timestamp = "2025-01-02T03:04:05.678Z";
  trial b;
  b.sequence = 1;
  b.cfg = {2, 0};
  b.st = status::compile_failed;
  b.error = "expected ';'";
  b.timestamp = "2025-01-02T03:04:06.000Z";
  return {a, b};
}

std::string export_text(export_format fmt, const nlohmann::json& meta) {
  std::ostringstream out;
  export_trials(two_trials(), two_param_space(), fmt, out, meta);
  return out.str();
}

TEST(export_formats, kernel_tuner_layout_is_kernel_tuners_own) {
  const auto text = export_text(export_format::kernel_tuner,
                                {{"device", "gpu"}, {"kernel", "k"}, {"problem_size", {64, 8}}});
  // Kernel Tuner's reader takes any file not ending in "}\n}" (after stripping) for an unfinished one.
  auto stripped = text;
  while (!stripped.empty() && std::isspace(static_cast<unsigned char>(stripped.back())))
    stripped.pop_back();
  ASSERT_GE(stripped.size(), 3u);
  EXPECT_EQ(stripped.substr(stripped.size() - 3), "}\n}") << text;
  // The header fields in Kernel Tuner's order, `cache` last.
  std::size_t at = 0;
  for (const char* key : {"\"device_name\"", "\"kernel_name\"", "\"problem_size\"", "\"tune_params_keys\"",
                          "\"tune_params\"", "\"objective\"", "\"cache\""}) {
    const auto pos = text.find(key, at);
    ASSERT_NE(pos, std::string::npos) << key << " missing or out of order:\n" << text;
    at = pos;
  }
  // One record per line, and the whole file is JSON.
  EXPECT_NE(text.find("\n\"32,shared\": {"), std::string::npos) << text;
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["problem_size"], nlohmann::json({64, 8}));
  EXPECT_EQ(doc["cache"].size(), 2u);
  // An empty run is a finished, empty cache too.
  std::ostringstream empty;
  export_trials({}, two_param_space(), export_format::kernel_tuner, empty, {});
  EXPECT_EQ(nlohmann::json::parse(empty.str())["cache"], nlohmann::json::object());
  EXPECT_EQ(empty.str().substr(empty.str().size() - 4), "}\n}\n");
}

TEST(export_formats, time_is_the_formats_mean_and_the_median_is_named) {
  const double mean = (1.0 + 1.1 + 1.9) / 3;
  const auto kt = nlohmann::json::parse(export_text(export_format::kernel_tuner, {}));
  const auto& rec = kt["cache"]["32,shared"];
  EXPECT_NEAR(rec["time"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(rec["time_median"].get<double>(), 1.1, 1e-12);
  EXPECT_EQ(rec["timestamp"], "2025-01-02T03:04:05.678Z");
  EXPECT_EQ(kt["cache"]["128,plain"]["time"], "CompilationFailedConfig");
  EXPECT_TRUE(kt.contains("time_definitions")) << kt.dump();

  const auto t4 = nlohmann::json::parse(export_text(export_format::t4, {}));
  const auto& res = t4["results"][0];
  EXPECT_EQ(res["timestamp"], "2025-01-02T03:04:05.678Z");
  std::map<std::string, double> m;
  for (const auto& x : res["measurements"])
    if (x["value"].is_number()) m[x["name"].get<std::string>()] = x["value"].get<double>();
  EXPECT_NEAR(m.at("time"), mean, 1e-12);
  EXPECT_NEAR(m.at("time_median"), 1.1, 1e-12);
  EXPECT_TRUE(t4["metadata"].contains("time_definitions")) << t4["metadata"].dump();

  const auto jsonl = nlohmann::json::parse(
      export_text(export_format::jsonl, {}).substr(0, export_text(export_format::jsonl, {}).find('\n')));
  EXPECT_EQ(jsonl["timestamp"], "2025-01-02T03:04:05.678Z");
  EXPECT_NE(export_text(export_format::csv, {}).find(",timestamp,"), std::string::npos);
}

// Stored trials carry the moment they were committed.
TEST(export_formats, stored_trials_have_timestamps) {
  test::temp_dir tmp;
  {
    run_store st(tmp.path() / "run");
    for (auto t : two_trials()) {
      t.timestamp.clear();
      st.commit(t);
    }
  }
  for (const auto& t : run_store(tmp.path() / "run").trials()) {
    ASSERT_EQ(t.timestamp.size(), 24u) << t.timestamp;  // 2025-01-02T03:04:05.678Z
    EXPECT_EQ(t.timestamp[10], 'T');
    EXPECT_EQ(t.timestamp.back(), 'Z');
  }
}

// Kernel Tuner (python/requirements.txt) loads the export of a kforge run with its own reader, replays
// it in simulation mode and finds the same best configuration.
TEST(export_formats, kernel_tuner_loads_the_export_and_finds_the_same_best) {
  std::string why;
  const auto python = test::python_with("kernel_tuner", why);
  if (!python) GTEST_SKIP() << why;
  test::temp_dir tmp;
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {t1: " + (root / "T1.json").string() +
          "}\nstrategy: random\nevaluator: {type: replay, params: {file: " + (root / "cache.json").string() +
          "}}\nbudget: {evaluations: 60}\nseed: 3\noutput: " + (tmp.path() / "run").string() + "\n");
  const std::string kforge = KFORGE_CLI;
  auto r = test::run_command(kforge + " run --quiet " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto out = tmp.path() / "kt.json";
  r = test::run_command(kforge + " export " + (tmp.path() / "run").string() +
                        " --format kernel_tuner --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command("(" + *python + " " + (test::source_dir() / "tests/support/kt_simulate.py").string() +
                        " " + out.string() + " 2>/dev/null)");
  ASSERT_EQ(r.status, 0) << "Kernel Tuner could not load the export:\n" << r.output;
  const auto got = nlohmann::json::parse(r.output.substr(r.output.rfind("{\"kernel_tuner\"")));
  // Kernel Tuner ranks by its `time` (the mean of the runs); kforge by the median. Both must name the
  // same configuration here, and Kernel Tuner must have seen every ok trial.
  run_store st(tmp.path() / "run");
  const auto space = space_from_description(st.meta("space"));
  const trial* best = nullptr;
  std::size_t ok = 0;
  const auto trials = st.trials();
  for (const auto& t : trials)
    if (t.ok()) {
      ++ok;
      if (!best || t.time_ms < best->time_ms) best = &t;
    }
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(got["evaluated"].get<std::size_t>(), ok) << r.output;
  EXPECT_EQ(got["best"], space.to_json(best->cfg)) << r.output;
}

}  // namespace
}  // namespace kf
