// kf::trial: what one evaluation of one configuration produced.
//
// Contract: a failing variant is never an exception; it is a trial whose status says how it failed
// and whose error says why. Only an ok trial has a kernel time; a wrong_result trial can never be
// the best.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/space.hpp"

namespace kf {

enum class status : std::uint8_t {
  ok,              ///< compiled, correct on every check shape, timed
  invalid,         ///< not a valid configuration (constraint, unknown to a recorded space, cannot launch)
  compile_failed,  ///< the compiler rejected it; error holds the log
  launch_failed,   ///< the launch was refused or failed without a fault (resources, bad grid)
  wrong_result,    ///< ran, but an output differed from the reference (or was NaN, or unwritten)
  timeout,         ///< exceeded the watchdog
  crashed,         ///< faulted (illegal address, trap) or took its worker down
};
inline constexpr std::size_t status_count = 7;
std::string_view to_string(status s) noexcept;
/// Inverse of to_string; nullopt for an unknown name.
std::optional<status> status_from_string(std::string_view s) noexcept;

/// Seconds that producing a trial cost, by stage. Replay charges the recorded values; the GPU engine
/// measures them. The run's clock advances by total().
struct trial_cost {
  double compile = 0;    ///< compilation (or the recorded compile_time)
  double check = 0;      ///< correctness checks (verification_time)
  double benchmark = 0;  ///< timing runs (benchmark_time)
  double profile = 0;    ///< profiling runs
  double framework = 0;  ///< everything else the framework spent (framework_time)
  double strategy = 0;   ///< the search strategy's own time (strategy_time)
  double total() const noexcept { return compile + check + benchmark + profile + framework + strategy; }
};

struct trial {
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();

  std::uint64_t sequence = 0;  ///< 0-based position in the run's trial sequence
  config cfg;                  ///< the configuration (indices into the space's value lists)
  status st = status::invalid;

  // Kernel time in milliseconds; NaN unless st == ok.
  double time_ms = nan;      ///< median of the timed runs: the objective
  double time_iqr_ms = nan;  ///< inter-quartile range of the timed runs
  double time_min_ms = nan;
  std::vector<double> times_ms;  ///< the individual timed runs (may be empty)

  trial_cost cost;
  /// Static metrics (registers, spills, shared memory, occupancy) and profiled metrics (CUPTI metric
  /// names, or the recorded counters of a replayed space), by name.
  std::map<std::string, double, std::less<>> metrics;
  std::string error;   ///< why it failed (compiler log, fault, mismatch); empty when ok
  std::string device;  ///< what produced it, e.g. "replay" or "cuda:0 NVIDIA H200"
  double sm_clock_mhz = nan;
  double clock_s = 0;  ///< the run's clock (simulated or wall, see experiment) when it completed
  std::uint32_t batch = 0;
  std::string timestamp;  ///< when the run store committed it (ISO 8601, UTC); empty until stored

  bool ok() const noexcept { return st == status::ok; }
  /// The metric `name`, or nullopt.
  std::optional<double> metric(std::string_view name) const;
};

/// Median, IQR (numpy's linear interpolation, like numpy.percentile) and minimum of `xs`.
struct summary_stats {
  double median = trial::nan, iqr = trial::nan, min = trial::nan, mean = trial::nan;
};
summary_stats summarize(std::vector<double> xs);

}  // namespace kf
