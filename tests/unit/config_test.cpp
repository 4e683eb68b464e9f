// Options, registries, documents (YAML/JSON with line numbers) and experiment configs.
#include <gtest/gtest.h>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/options.hpp"
#include "kforge/registry.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::vector<option_spec> specs = {
    int_option("population_size", 10, "individuals", 2, 1000),
    real_option("rate", 0.1, "a probability", 0, 1),
    bool_option("flag", false, "a switch"),
    string_option("mode", "a", "a choice", {"a", "b"}),
    required_option("file", option_type::string, "a file"),
};

TEST(options, defaults_and_given_values) {
  const options o(specs, {{"file", "x.json"}, {"rate", 0.5}}, {"c.yaml", "strategy.params"});
  EXPECT_EQ(o.integer("population_size"), 10);
  EXPECT_DOUBLE_EQ(o.real("rate"), 0.5);
  EXPECT_FALSE(o.boolean("flag"));
  EXPECT_EQ(o.string("mode"), "a");
  EXPECT_EQ(o.string("file"), "x.json");
  EXPECT_EQ(o.resolved().size(), specs.size());
}

void expect_config_error(const nlohmann::json& params, const std::string& key_path,
                         const std::string& words) {
  try {
    options o(specs, params, {"c.yaml", "strategy.params"});
    FAIL() << "accepted " << params.dump();
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), "c.yaml");
    EXPECT_EQ(e.key_path(), key_path) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(options, misuse_names_file_key_and_reason) {
  expect_config_error({{"file", "x"}, {"popsize", 3}}, "strategy.params.popsize", "unknown option");
  expect_config_error({{"file", "x"}, {"population_size", 1}}, "strategy.params.population_size",
                      "must be >= 2, got 1");  // an integer option's bound reads as an integer
  expect_config_error({{"file", "x"}, {"population_size", "ten"}}, "strategy.params.population_size",
                      "integer");
  expect_config_error({{"file", "x"}, {"population_size", 2.5}}, "strategy.params.population_size",
                      "integer");
  expect_config_error({{"file", "x"}, {"rate", 1.5}}, "strategy.params.rate", "<= 1");
  expect_config_error({{"file", "x"}, {"flag", "yes"}}, "strategy.params.flag", "true or false");
  expect_config_error({{"file", "x"}, {"mode", "c"}}, "strategy.params.mode", "one of a, b");
  expect_config_error(nlohmann::json::object(), "strategy.params.file", "required");
  expect_config_error(nlohmann::json::array(), "strategy.params", "mapping");
}

TEST(registry, create_validates_and_names_alternatives) {
  registry<int> r("widget");
  r.add({"one", "returns one", {int_option("k", 1, "added", 0, 10)}, [](const options& o) {
           return 1 + static_cast<int>(o.integer("k"));
         }});
  EXPECT_THROW(r.add({"one", "", {}, [](const options&) { return 0; }}), error);
  EXPECT_EQ(r.create({"one", {{"k", 4}}, {"f.yaml", "w"}}), 5);
  try {
    r.create({"two", {}, {"f.yaml", "w"}});
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.key_path(), "w.type");
    EXPECT_NE(std::string(e.what()).find("registered: one"), std::string::npos);
  }
  EXPECT_THROW(r.create({"one", {{"j", 1}}, {"f.yaml", "w"}}), config_error);
}

TEST(document, yaml_types_and_line_numbers) {
  const auto d =
      parse_document("a: 1\nb: 2.5\nc: true\nd: 'true'\ne: null\nf: [1, x]\ng:\n  h: 0x10\n", "t.yaml", "");
  EXPECT_TRUE(d.root["a"].is_number_integer());
  EXPECT_TRUE(d.root["b"].is_number_float());
  EXPECT_TRUE(d.root["c"].is_boolean());
  EXPECT_TRUE(d.root["d"].is_string());
  EXPECT_TRUE(d.root["e"].is_null());
  EXPECT_EQ(d.root["f"][1], "x");
  EXPECT_EQ(d.root["g"]["h"], 16);
  EXPECT_EQ(d.at("g.h").file, "t.yaml:8");
  EXPECT_EQ(d.at("g.nothere").file, "t.yaml:7");  // the nearest known ancestor
  EXPECT_THROW(parse_document("a: [1, 2\n", "t.yaml", ""), config_error);
  EXPECT_THROW(parse_document("a: 1\na: 2\n", "t.yaml", ""), config_error);
}

TEST(experiment_config, valid_config_loads) {
  register_builtins();
  test::temp_dir tmp;
  const auto t1 = test::source_dir() / "experiments/stencil2d-h200/T1.json";
  const auto cache = test::source_dir() / "experiments/stencil2d-h200/cache.json";
  const auto cfg = test::write_file(tmp.path() / "e.yaml",
                                    "name: t\nproblem: {t1: " + t1.string() +
                                        "}\nstrategy: {type: ga, params: {population_size: 8}}\n"
                                        "evaluator: {type: replay, params: {file: " +
                                        cache.string() + "}}\nbudget: {evaluations: 10}\nseed: 3\n");
  const auto s = load_experiment(cfg.string());
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.prob.space.dimension(), 5u);
  EXPECT_EQ(s.strategy.type, "ga");
  EXPECT_EQ(s.budget.evaluations, 10u);
  EXPECT_EQ(s.seed, 3u);
}

TEST(experiment_config, errors_name_file_line_and_key) {
  register_builtins();
  test::temp_dir tmp;
  const auto t1 = (test::source_dir() / "experiments/stencil2d-h200/T1.json").string();
  const std::string head =
      "problem: {t1: " + t1 + "}\nevaluator: {type: replay, params: {file: " + t1 + "}}\n";
  struct bad_case {
    std::string text, key, words;
  };
  const std::vector<bad_case> cases = {
      {head + "strategy: {type: gaa}\n", "strategy.type", "unknown strategy 'gaa'"},
      {head + "strategy: {type: ga, params: {popsize: 3}}\n", "strategy.params.popsize", "unknown option"},
      {head + "strategy: ga\nbudget: {evaluations: -1}\n", "budget.evaluations", "positive"},
      {head + "strategy: ga\nbudget: {evals: 3}\n", "budget.evals", "unknown key"},
      {head + "strategy: ga\nbudget: {evaluations: 3, wall_grace_s: 2}\n", "budget.wall_grace_s",
       "only with wall_time_s"},
      {head + "strategy: ga\nbudget: {evaluations: 3, wall_includes_setup: true}\n",
       "budget.wall_includes_setup", "only with wall_time_s"},
      {head + "strategy: ga\nbudget: {wall_time_s: 3, wall_includes_setup: 1}\n",
       "budget.wall_includes_setup", "true or false"},
      {head + "strategy: ga\nseed: x\n", "seed", "non-negative integer"},
      {head + "strategy: ga\nsed: 1\n", "sed", "unknown key"},
      {"problem: {t1: /nonexistent/T1.json}\nstrategy: ga\nevaluator: replay\n", "problem.t1", "cannot open"},
  };
  for (const auto& c : cases) {
    const auto f = test::write_file(tmp.path() / "bad.yaml", c.text);
    try {
      load_experiment(f.string());
      ADD_FAILURE() << "accepted:\n" << c.text;
    } catch (const config_error& e) {
      EXPECT_EQ(e.key_path(), c.key) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << e.what();
      EXPECT_NE(e.file().find("bad.yaml"), std::string::npos) << e.what();
    }
  }
}

TEST(experiment_config, cli_exit_status_2_and_one_line) {
  test::temp_dir tmp;
  const auto f = test::write_file(tmp.path() / "bad.yaml", "strategy: {type: ga}\n");
  const auto r = test::run_command(std::string(KFORGE_CLI) + " run " + f.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("bad.yaml"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("problem"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace
}  // namespace kf
