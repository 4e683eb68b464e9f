// Constraints that raise (division by zero, 0 ** -1) remove configurations, and kforge says so: the
// number removed, the first expression and configuration (in enumeration order, whatever the threads'
// timing); a space left without a valid configuration is an error for `run` and a warning for `space`.
#include <gtest/gtest.h>

#include "kforge/problem.hpp"
#include "kforge/space.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

search_space raising_space() {
  std::vector<param> ps;
  ps.push_back(make_param("a", param_type::integer, {0, 1, 2, 3}));
  ps.push_back(make_param("b", param_type::integer, {0, 1, 2}));
  ps.push_back(make_param("c", param_type::integer, {1, 2, 3, 4, 5, 6, 7, 8}));
  // a / b raises for b == 0 (4 * 8 configurations); 0 ** -1 raises for a == 0 and c == 1 once b != 0.
  return search_space(std::move(ps), {"a / b <= 3", "a ** (c - 2) >= 0"});
}

TEST(raising_constraints, are_counted_with_the_first_expression_and_configuration) {
  for (int round = 0; round < 3; ++round) {  // the same report every time (parallel enumeration)
    const auto sp = raising_space();
    const auto check = check_space(sp);
    ASSERT_TRUE(check.enumerated);
    EXPECT_EQ(check.combinations, 96);
    EXPECT_EQ(check.raised_configurations, 32 + 2);  // b == 0; a == 0, c == 1, b in {1, 2}
    EXPECT_EQ(check.valid, 96u - 34u);
    EXPECT_EQ(check.first_raise, "constraint 'a / b <= 3' raised at {a=0, b=0}: division by zero")
        << check.first_raise;
    const auto w = check.warnings();
    EXPECT_NE(w.find("warning: a constraint raised on 34 of 96 configurations"), std::string::npos) << w;
  }
}

TEST(raising_constraints, an_empty_space_is_an_error_for_run_and_a_warning_for_space) {
  test::temp_dir tmp;
  nlohmann::json t1 = {{"ConfigurationSpace",
                        {{"TuningParameters", {{{"Name", "x"}, {"Type", "int"}, {"Values", "[0, 1, 2]"}}}},
                         {"Conditions", {{{"Expression", "1 // (x - x) > 0"}}}}}}};
  const auto t1_file = test::write_file(tmp.path() / "T1.json", t1.dump());
  const std::string kforge = KFORGE_CLI;
  auto r = test::run_command(kforge + " space " + t1_file.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: a constraint raised on 3 of 3 configurations"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("raised at {x=0}: integer division by zero"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("warning: no configuration of the 3 combinations"), std::string::npos) << r.output;
  const auto cfg =
      test::write_file(tmp.path() / "e.yaml",
                       "problem: {t1: T1.json}\nstrategy: random\n"
                       "evaluator: {type: replay, params: {file: " +
                           (test::source_dir() / "experiments/stencil2d-h200/cache.json").string() +
                           "}}\noutput: " + (tmp.path() / "run").string() + "\n");
  r = test::run_command(kforge + " run " + cfg.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("e.yaml: problem: the space has no valid configuration"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "run")) << "an empty space started a run";
}

}  // namespace
}  // namespace kf
