// The field's standard score (Willemsen et al., FGCS 2024; autotuning_methodology's baseline.py,
// searchspace_statistics.py, curves.py), computed on recorded spaces.
//
// For a space with N correct configurations (performances sorted ascending: dist), median m and
// optimum o, the time range runs from the cutoff at p_start to the cutoff at p_end, where the cutoff at
// p is the time random search is expected to need to reach o + (m - o)(1 - p):
//   i = first index of the descending dist with value <= target, fevals = ceil(i / (N + 1 - i)),
//   time = fevals x the median total time of an evaluation (all time keys, all records).
// The calculated random baseline at time t draws M = max(round(t / time_per_feval), 1) configurations
// and sits at index min(N - 1, round(M (N + 1) / (M + 1))) of the descending dist; time_per_feval is
// the mean total time of a correct evaluation plus the invalid fraction times that of an invalid one.
// A strategy's curve F(t) pools every seed's (cumulative time, index of the best-so-far in dist) points,
// fits a decreasing isotonic regression and reads it at each t; after the median run's last time it is
// held constant. P(t) = (F(t) - S_random(t)) / (o - S_random(t)); the score is the mean of P(t) over the
// time range (0 = random search, 1 = the optimum from the start).
//
// Deviations from autotuning_methodology, all deliberate: the objective is the median of each
// configuration's recorded runs, not their mean; the strategy curve is the isotonic fit on all points,
// where the methodology takes the mean of a randomly bagged ensemble of such fits (unseeded), so that
// kforge's scores are reproducible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/recorded.hpp"
#include "kforge/trial.hpp"

namespace kf {

/// Statistics of a fully recorded space (searchspace_statistics.py).
class space_statistics {
 public:
  explicit space_statistics(const recorded_file& f);

  std::size_t size() const noexcept { return size_; }  ///< records, failed ones included
  std::size_t valid_count() const noexcept { return dist_.size(); }
  const std::vector<double>& sorted_performances() const noexcept { return dist_; }  ///< ascending
  double optimum() const noexcept { return dist_.front(); }
  double median() const noexcept { return median_; }
  double total_time_median() const noexcept { return total_time_median_; }  ///< seconds per evaluation
  double time_per_feval() const noexcept { return time_per_feval_; }        ///< "mean_per_feval", seconds

  struct cutoff {
    double value;
    std::size_t fevals;
    double time_s;
  };
  cutoff cutoff_point(double percentile) const;

  /// The calculated random-search baseline at simulated time t (seconds).
  double random_baseline(double t) const;
  /// Index in sorted_performances() of `v` (searchsorted, side=left).
  std::size_t index_of(double v) const;

 private:
  std::size_t size_ = 0;
  std::vector<double> dist_;
  double median_ = 0, total_time_median_ = 0, time_per_feval_ = 0;
};

/// One run of a strategy on a space: the trials in sequence order (clock_s cumulative).
using run_trace = std::vector<trial>;

struct score_settings {
  double cutoff_start = 0.01;
  double cutoff_end = 0.95;
  std::size_t resolution = 1000;  ///< points of the time range
};

struct space_score {
  double score = 0;             ///< mean P(t) of the pooled curve (the methodology's number)
  std::vector<double> per_run;  ///< mean P(t) of each run's own curve
  double per_run_mean = 0, per_run_std = 0;
  std::vector<double> time_range;     ///< seconds
  std::vector<double> p_curve;        ///< pooled P(t)
  double real_stopping_fraction = 1;  ///< fraction of the range before the median run ended
};

/// The time range [cutoff(start), cutoff(end)] with `resolution` points.
std::vector<double> score_time_range(const space_statistics& st, const score_settings& s);

/// Scores the runs of one strategy on one space.
space_score score_runs(const space_statistics& st, const std::vector<run_trace>& runs,
                       const score_settings& s);

/// Decreasing isotonic regression of y on x (pool-adjacent-violators; ties in x averaged), evaluated at
/// `at` by linear interpolation between the fitted points and clipped outside them. Exposed for tests.
std::vector<double> isotonic_decreasing(std::vector<double> x, std::vector<double> y,
                                        const std::vector<double>& at);

}  // namespace kf
