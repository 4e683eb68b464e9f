#include <gtest/gtest.h>

#include <cmath>

#include "kforge/score.hpp"

namespace kf {
namespace {

// A recorded space of n correct configurations with times 1..n ms, each costing 1 s to evaluate, plus
// `failed` failures costing 0.5 s.
recorded_file synthetic(std::size_t n, std::size_t failed = 0) {
  recorded_file f;
  f.path = "synthetic";
  f.param_names = {"i"};
  for (std::size_t i = 0; i < n + failed; ++i) {
    recorded_record r;
    r.params["i"] = value(static_cast<std::int64_t>(i));
    if (i < n) {
      r.result.st = status::ok;
      r.result.time_ms = static_cast<double>(i + 1);
      r.result.cost.benchmark = 1.0;
    } else {
      r.result.st = status::compile_failed;
      r.result.cost.compile = 0.5;
    }
    f.records.push_back(r);
  }
  return f;
}

TEST(score, statistics_follow_searchspace_statistics) {
  const space_statistics st(synthetic(99, 1));
  EXPECT_EQ(st.size(), 100u);
  EXPECT_EQ(st.valid_count(), 99u);
  EXPECT_DOUBLE_EQ(st.optimum(), 1.0);
  EXPECT_DOUBLE_EQ(st.median(), 50.0);
  EXPECT_DOUBLE_EQ(st.total_time_median(), 1.0);
  EXPECT_NEAR(st.time_per_feval(), 1.0 + 0.01 * 0.5, 1e-12);  // valid mean + invalid fraction x invalid mean
  // Cutoff 0.95: target = 1 + 49 * 0.05 = 3.45, so values 1..3 qualify; in the descending order the first
  // of them is at i = 96; fevals = ceil(96 / (99 + 1 - 96)) = 24.
  const auto c = st.cutoff_point(0.95);
  EXPECT_DOUBLE_EQ(c.value, 3.45);
  EXPECT_EQ(c.fevals, 24u);
  EXPECT_DOUBLE_EQ(c.time_s, 24.0);
}

TEST(score, random_baseline_is_the_expected_rank) {
  const space_statistics st(synthetic(99));
  // M draws: index round(M (N + 1) / (M + 1)) of the descending distribution (N = 99).
  // The descending distribution is 99, 98, ..., 1: index k holds 99 - k.
  EXPECT_DOUBLE_EQ(st.random_baseline(1.0), 49.0);  // M = 1: index round(100 / 2) = 50
  EXPECT_DOUBLE_EQ(st.random_baseline(9.0), 9.0);   // M = 9: index round(900 / 10) = 90
  EXPECT_DOUBLE_EQ(st.random_baseline(0.1), 49.0);  // fewer than one draw counts as one
  EXPECT_DOUBLE_EQ(st.random_baseline(1e9), 1.0);   // clipped at the optimum
}

TEST(score, isotonic_regression) {
  // Already decreasing: reproduced, interpolated between points and clipped outside.
  auto y = isotonic_decreasing({1, 2, 3}, {5, 3, 1}, {0, 1.5, 3, 4});
  EXPECT_EQ(y, (std::vector<double>{5, 4, 1, 1}));
  // A violation is pooled: (2, 4) -> 3, 3.
  y = isotonic_decreasing({1, 2, 3}, {2, 4, 0}, {1, 2, 3});
  EXPECT_EQ(y, (std::vector<double>{3, 3, 0}));
  // Ties in x are averaged.
  y = isotonic_decreasing({1, 1, 2}, {4, 2, 1}, {1, 2});
  EXPECT_EQ(y, (std::vector<double>{3, 1}));
}

run_trace trace_of(const std::vector<double>& times_ms, double cost = 1.0) {
  run_trace r;
  double clock = 0;
  for (std::size_t i = 0; i < times_ms.size(); ++i) {
    trial t;
    t.sequence = i;
    t.st = status::ok;
    t.time_ms = times_ms[i];
    clock += cost;
    t.clock_s = clock;
    r.push_back(t);
  }
  return r;
}

TEST(score, optimum_first_scores_one) {
  const space_statistics st(synthetic(200));
  std::vector<run_trace> runs = {trace_of({1.0, 150.0, 20.0}), trace_of({1.0, 3.0})};
  const auto s = score_runs(st, runs, {});
  EXPECT_NEAR(s.score, 1.0, 1e-12);
  for (double p : s.p_curve)
    EXPECT_NEAR(p, 1.0, 1e-12);
  EXPECT_NEAR(s.per_run_mean, 1.0, 1e-12);
}

TEST(score, worse_than_random_is_negative_and_better_positive) {
  const space_statistics st(synthetic(200));
  // Stuck at the median for the whole budget: far worse than random search late in the range.
  std::vector<run_trace> stuck = {trace_of(std::vector<double>(60, 100.0))};
  EXPECT_LT(score_runs(st, stuck, {}).score, 0.0);
  std::vector<run_trace> good = {trace_of({50, 20, 2, 2, 2, 2, 2, 2, 2, 2})};
  EXPECT_GT(score_runs(st, good, {}).score, 0.5);
}

}  // namespace
}  // namespace kf
