// Hostile values: counts, seeds and names are checked where they are read; non-finite numbers read nan
// and inf in messages; echoes of long input are cut. Exit status 2 from the CLI, one message naming
// the key or the option.
#include <gtest/gtest.h>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string stencil(const char* file) {
  return (test::source_dir() / "experiments/stencil2d-h200" / file).string();
}

TEST(hostile_values, negative_and_malformed_counts_are_refused) {
  const std::string t1 = stencil("T1.json");
  for (const std::string& args : std::vector<std::string>{
           "run --evaluations -1", "run --evaluations 0", "run --evaluations 1e3", "run --seed -1",
           "run --seed 18446744073709551616", "space " + t1 + " --sample -1", "space " + t1 + " --list=-5"}) {
    const auto r = test::run_command(kforge + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("expected a whole number"), std::string::npos) << args << ": " << r.output;
  }
}

void expect_config_error_at(const std::string& text, const std::string& key, const std::string& words) {
  test::temp_dir tmp;
  const auto f = test::write_file(tmp.path() / "e.yaml", text);
  try {
    load_experiment(f.string());
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const config_error& e) {
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 1000u) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a config error: " << e.what();
  }
}

std::string experiment_head() {
  return "problem: {t1: " + stencil("T1.json") +
         "}\nevaluator: {type: replay, params: {file: " + stencil("cache.json") + "}}\nstrategy: random\n";
}

TEST(hostile_values, seeds_out_of_range_name_the_key) {
  register_builtins();
  expect_config_error_at(experiment_head() + "seed: 0xFFFFFFFFFFFFFFFFFFFF\n", "seed",
                         "0 to 18446744073709551615");
  expect_config_error_at(experiment_head() + "seed: 99999999999999999999999\n", "seed",
                         "non-negative integer");
  expect_config_error_at(experiment_head() + "seed: -1\n", "seed", "non-negative integer");
  test::temp_dir tmp;
  const auto f = test::write_file(tmp.path() / "e.yaml", experiment_head() + "seed: 0xFFFFFFFFFFFFFFFF\n");
  EXPECT_EQ(load_experiment(f.string()).seed, 18446744073709551615ull);
}

TEST(hostile_values, names_are_one_bounded_path_component) {
  register_builtins();
  expect_config_error_at(experiment_head() + "name: a/../../escape\n", "name", "one folder name");
  expect_config_error_at(experiment_head() + "name: ..\n", "name", "letter or a digit");
  expect_config_error_at(experiment_head() + "name: " + std::string(300, 'x') + "\n", "name", "at most 64");
  // A name taken from the file's name is made into one.
  test::temp_dir tmp;
  const auto f = test::write_file(tmp.path() / "my experiment (v2).yaml", experiment_head());
  EXPECT_EQ(load_experiment(f.string()).name, "my_experiment__v2_");
}

TEST(hostile_values, non_finite_numbers_read_nan_and_inf_in_messages) {
  register_builtins();
  expect_config_error_at(experiment_head() + "budget: {simulated_time_s: .nan}\n", "budget.simulated_time_s",
                         "got nan");
  expect_config_error_at(experiment_head() + "budget: {simulated_time_s: -.inf}\n", "budget.simulated_time_s",
                         "got -inf");
  test::temp_dir tmp;
  const auto f = test::write_file(tmp.path() / "e.yaml",
                                  "problem: {t1: " + stencil("T1.json") +
                                      "}\nevaluator: {type: replay, params: {file: " + stencil("cache.json") +
                                      "}}\nstrategy: {type: ga, params: {mutation_rate: .inf}}\n");
  try {
    load_experiment(f.string());
    ADD_FAILURE() << "accepted an infinite mutation rate";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("inf"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("null"), std::string::npos) << e.what();
  }
}

TEST(hostile_values, long_expressions_are_echoed_cut) {
  test::temp_dir tmp;
  // A 1 MB constraint that names an unknown parameter, and one that does not parse.
  for (const std::string& constraint :
       {"x == " + std::string(1'000'000, 'a'), "x == (" + std::string(1'000'000, '1') + " +"}) {
    nlohmann::json t1 = {{"ConfigurationSpace",
                          {{"TuningParameters", {{{"Name", "x"}, {"Type", "int"}, {"Values", "[1, 2]"}}}},
                           {"Conditions", {{{"Expression", constraint}}}}}}};
    const auto f = test::write_file(tmp.path() / "T1.json", t1.dump());
    const auto r = test::run_command(kforge + " space " + f.string());
    EXPECT_EQ(r.status, 2) << r.output.substr(0, 2000);
    EXPECT_LT(r.output.size(), 2000u) << r.output.substr(0, 2000);
    EXPECT_NE(r.output.find("characters in all"), std::string::npos) << r.output.substr(0, 2000);
  }
}

}  // namespace
}  // namespace kf
