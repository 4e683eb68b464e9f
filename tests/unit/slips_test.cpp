// The slips a new user meets: plugins' headings, integer ranges and transforms; `kforge help CMD`;
// export's optional --format; space naming a recording's format; a run that never started; the
// README's example config; a convergence table whose clock only moves forward.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(slips, plugins_lists_strategies_evaluators_and_transforms_with_integer_ranges) {
  const auto r = test::run_command(kforge + " plugins");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("strategys"), std::string::npos);
  for (const char* words : {"strategies:\n", "evaluators:\n", "transforms:\n", "unroll",
                            "population_size (integer, "
                            "default 10, range [2, "
                            "100000])"})
    EXPECT_NE(r.output.find(words), std::string::npos) << words;
  EXPECT_EQ(std::regex_search(r.output, std::regex(R"(\(integer[^)]*range \[-?[0-9]+\.0)")), false)
      << "an integer range printed as floats";
}

TEST(slips, help_command_and_export_format_defaults) {
  const auto help = test::run_command(kforge + " help run");
  const auto direct = test::run_command(kforge + " run --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.output, direct.output);
  EXPECT_NE(help.output.find("usage: kforge run"), std::string::npos) << help.output;
  const auto exp = test::run_command(kforge + " export --help");
  EXPECT_NE(exp.output.find("usage: kforge export RUN [--format FORMAT] [--out FILE]"), std::string::npos)
      << exp.output;
  EXPECT_NE(exp.output.find("(=jsonl)"), std::string::npos) << exp.output;
}

TEST(slips, space_names_a_recordings_format) {
  test::temp_dir tmp;
  const auto t1 = (test::source_dir() / "experiments/stencil2d-h200/T1.json").string();
  const auto cache = (test::source_dir() / "experiments/stencil2d-h200/cache.json").string();
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {t1: " + t1 +
          "}\nstrategy: random\nevaluator: {type: replay, "
          "params: {file: " +
          cache + "}}\nbudget: {evaluations: 5}\noutput: " + (tmp.path() / "run").string() + "\n");
  ASSERT_EQ(test::run_command(kforge + " run --quiet " + cfg.string()).status, 0);
  ASSERT_EQ(test::run_command(kforge + " export " + (tmp.path() / "run").string() + " --format t4 --out " +
                              (tmp.path() / "t4.json").string())
                .status,
            0);
  auto r = test::run_command(kforge + " space " + (tmp.path() / "t4.json").string());
  EXPECT_NE(r.output.find("(recording: T4 results;"), std::string::npos) << r.output;
  r = test::run_command(kforge + " space " + cache);
  EXPECT_NE(r.output.find("(recording: Kernel Tuner cache;"), std::string::npos) << r.output;
  r = test::run_command(kforge + " space " + t1);
  EXPECT_NE(r.output.find("(T1 file)"), std::string::npos) << r.output;
}

TEST(slips, a_run_that_never_started_is_reported_as_such) {
  test::temp_dir tmp;
  // The cuda evaluator with a worker that cannot start (as on a machine without a GPU).
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {kernel: " + (test::source_dir() / "experiments/kernels/saxpy/kernel.yaml").string() +
          "}\nstrategy: random\nevaluator: {type: cuda, params: {worker: /bin/false, "
          "profile: false}}\nbudget: {evaluations: 3}\noutput: " +
          (tmp.path() / "gpu").string() + "\n");
  auto r = test::run_command(kforge + " run --quiet " + cfg.string());
  EXPECT_EQ(r.status, 1) << r.output;
  r = test::run_command(kforge + " report " + (tmp.path() / "gpu").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("0 trials, failed: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not finished"), std::string::npos) << r.output;
  // A store that got as far as its space and no further (killed at start).
  {
    run_store st(tmp.path() / "early");
    std::vector<param> ps;
    ps.push_back(make_param("x", param_type::integer, {1, 2}));
    st.set_meta("space", describe_space(search_space(std::move(ps), {})));
  }
  r = test::run_command(kforge + " report " + (tmp.path() / "early").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("0 trials, never started"), std::string::npos) << r.output;
}

TEST(slips, the_readme_shows_the_shipped_example_config) {
  const auto readme = read_text(test::source_dir() / "README.md");
  const auto shipped = read_text(test::source_dir() / "configs/examples/convolution-a100.yaml");
  ASSERT_FALSE(shipped.empty());
  EXPECT_NE(readme.find("```yaml\n" + shipped + "```"), std::string::npos)
      << "README.md's example differs from configs/examples/convolution-a100.yaml:\n"
      << shipped;
}

TEST(slips, the_convergence_clock_only_moves_forward) {
  test::temp_dir tmp;
  {
    run_store st(tmp.path() / "run");
    std::vector<param> ps;
    ps.push_back(make_param("x", param_type::integer, {1, 2, 3, 4}));
    const search_space space(std::move(ps), {});
    st.set_meta("space", describe_space(space));
    // Trials of an asynchronous run: sequence order is not arrival order.
    const std::vector<std::pair<double, double>> clock_and_time = {
        {5.0, 2.0}, {1.0, 1.0}, {3.0, 0.5}, {2.0, 3.0}};
    for (std::uint32_t i = 0; i < 4; ++i) {
      trial t;
      t.sequence = i;
      t.cfg = {i};
      t.st = status::ok;
      t.clock_s = clock_and_time[i].first;
      t.time_ms = clock_and_time[i].second;
      st.commit(t);
    }
  }
  const auto r = test::run_command(kforge + " report " + (tmp.path() / "run").string());
  ASSERT_EQ(r.status, 0) << r.output;
  // Rows: trials, best, at trial, known at (N.N s), vs final.
  const std::regex row(R"(\n\s+([0-9]+)\s+([0-9.]+)\s+([0-9]+)\s+([0-9.]+) s\s+)");
  std::vector<double> known;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), row), end; it != end; ++it)
    known.push_back(std::stod((*it)[4]));
  ASSERT_EQ(known.size(), 4u) << r.output;
  EXPECT_TRUE(std::is_sorted(known.begin(), known.end())) << r.output;
  EXPECT_EQ(known, (std::vector<double>{1.0, 1.0, 3.0, 3.0})) << r.output;
}

}  // namespace
}  // namespace kf
