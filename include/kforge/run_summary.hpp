// kf::run_summary: what a run folder holds, read (read-only) for the commands that show runs: report,
// runs, compare and the convergence plots.
//
// Convergence is taken in arrival order (by the run's clock, then sequence): after the n-th trial to
// arrive, the best time so far, the trial that set it and the clock at which it was known. Both clocks
// are non-decreasing, which sequence order does not give for asynchronous runs.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

struct convergence_point {
  std::size_t trials = 0;       ///< trials arrived so far
  double clock_s = 0;           ///< the run's clock when the last of them arrived
  double best_ms = trial::nan;  ///< best time so far; NaN while no trial is ok
  std::uint64_t best_sequence = 0;
  double best_clock_s = trial::nan;  ///< the clock at which that best was known
};

struct run_summary {
  std::filesystem::path folder;
  std::string name;
  std::string config_file;
  std::string strategy;            ///< type
  nlohmann::json strategy_params;  ///< as given
  std::string evaluator;           ///< type
  nlohmann::json evaluator_meta;   ///< the evaluator's own description (device, recording, ...)
  nlohmann::json seed;             ///< null when the store predates the record
  nlohmann::json budget;           ///< {evaluations, wall_time_s, simulated_time_s}, as run
  nlohmann::json batch_size;
  /// "finished", "interrupted", "failed", "running", "never started" or "stopped" (killed, or it
  /// ended without a record).
  std::string state;
  std::string state_detail;  ///< the stop reason, the failure, the holder's pid, ...
  search_space space;
  std::vector<trial> trials;  ///< by sequence
  std::array<std::size_t, status_count> by_status{};
  std::optional<std::size_t> best;             ///< index into trials of the best ok trial
  nlohmann::json recorded_optimum;             ///< replay: {time_ms, configuration}; null otherwise
  std::vector<convergence_point> convergence;  ///< one point per arrival

  const trial* best_trial() const { return best ? &trials[*best] : nullptr; }
};

/// Reads a run folder read-only (run_store, store_access::read_only). Throws kf::error naming the file
/// when the folder holds no readable run.
run_summary read_run(const std::filesystem::path& folder);

/// The first point at which the run's best so far was within `fraction` of `target_ms` in performance
/// (best_ms <= target_ms / fraction); nullopt when it never was.
std::optional<convergence_point> first_within(const run_summary& r, double target_ms, double fraction);

/// Up to `per_status` failed trials of each status, in sequence order, each "trial N {config}: error"
/// cut to `max_chars`.
std::vector<std::pair<status, std::vector<std::string>>> failure_examples(const run_summary& r,
                                                                          std::size_t per_status = 3,
                                                                          std::size_t max_chars = 240);

/// The summary as JSON: identity, state, counts by status, best, recorded optimum, failures and the
/// convergence (each point where the best changed, and the last).
nlohmann::json summary_json(const run_summary& r);

/// The runs directly under `root` (and `root` itself when it is a run folder), by folder name; folders
/// that are not readable runs are skipped.
std::vector<run_summary> read_runs(const std::filesystem::path& root);

}  // namespace kf
