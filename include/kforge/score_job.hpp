// Scoring strategies on recorded spaces: N seeded runs of every strategy on every space, each under a
// simulated-time budget of the space's end cutoff plus a margin, scored with kf::score_runs.
//
// A score config (YAML or JSON):
//   spaces:                 # each: a recording, and optionally the T1 file that defines its space and
//                           # recordings of the same kernel elsewhere (transfer, for strategies that ask)
//     - {name: convolution/A100, recording: path/A100.json.gz, t1: path/T1.json,
//        transfer: [path/A4000.json.gz, path/MI250X.json.gz]}
//   strategies: [random, {type: ga, params: {population_size: 20}},
//                {type: hybrid, transfer: true}]   # transfer: true: the space's transfer records
//                                                  # (docs/transfer.md); the label gets " +transfer"
//   seeds: 100              # runs per strategy and space (seeds seed_base .. seed_base + seeds - 1)
//   seed_base: 0
//   cutoff_start: 0.01
//   cutoff_end: 0.95
//   resolution: 1000
//   budget_margin: 0.1      # the budget is (1 + margin) x the end cutoff's time, as the methodology sets it
//   external: [kt_runs.json] # runs of other tools: {"runs": {space: {strategy: [[cache key, ...], ...]}}},
//                            # the order each run visited configurations; replayed on the same clock,
//                            # cut at the same budget and scored like kforge's own strategies
//   plugins: [my_strategies.so] # shared-library plug-ins to load first (docs/plugins.md)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/registry.hpp"
#include "kforge/score.hpp"

namespace kf {

struct score_space_spec {
  std::string name;
  std::string recording;  ///< resolved path
  std::string t1;         ///< resolved path, or empty: the space is the recorded configurations
  std::vector<std::string> transfer;  ///< resolved paths of recordings of the same kernel elsewhere
};

struct score_job {
  std::vector<score_space_spec> spaces;
  std::vector<plugin_spec> strategies;
  std::vector<bool> strategy_transfer;  ///< per strategy: give it the space's transfer records
  std::size_t seeds = 10;
  std::uint64_t seed_base = 0;
  score_settings settings;
  double budget_margin = 0.1;
  std::vector<std::string> external;  ///< files of other tools' runs (resolved paths)
  std::string file;  ///< where it was read from
};

/// Reads a score config. Errors are config_errors with file and key path.
score_job load_score_job(const std::string& path);
/// The same from an already parsed document.
score_job parse_score_job(const document& doc);

struct score_cell {
  std::string space, strategy;
  space_score score;
  double mean_evaluations = 0;    ///< trials per run
  double mean_best_over_opt = 0;  ///< best found / optimum at the end of the budget
};

struct score_table {
  std::vector<std::string> spaces, strategies;
  std::vector<score_cell> cells;  ///< space-major
  const score_cell& at(std::size_t space, std::size_t strategy) const {
    return cells[space * strategies.size() + strategy];
  }
  /// Mean over spaces of a strategy's pooled score.
  double mean_score(std::size_t strategy) const;
};

/// Runs the job (runs in parallel); `progress` is called after each (space, strategy) cell.
score_table run_score_job(const score_job& job, const std::function<void(const score_cell&)>& progress = {});

/// The table as text (spaces as rows, strategies as columns, a mean row), and as JSON with curves.
std::string format_score_table(const score_table& t);
nlohmann::json score_table_json(const score_table& t);

}  // namespace kf
