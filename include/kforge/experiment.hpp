// kf::experiment: the search loop — propose, evaluate, commit, observe — under a budget.
//
//   strategy.propose(n) -> check proposals -> evaluator -> store.commit(trial) -> strategy.observe(batch)
//
// Budget: any of evaluations, wall-clock seconds and simulated seconds (the sum of the trials' costs,
// for replay); the loop stops before starting a batch once a limit is reached, and never proposes more
// evaluations than are left. Resume: with a store that already holds trials, the loop re-runs the
// strategy from its seed and hands it the stored trials instead of evaluating them again, so a run
// killed at any point continues without losing or repeating a trial, and ends as the uninterrupted run
// would have.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kforge/evaluator.hpp"
#include "kforge/experiment_config.hpp"
#include "kforge/history.hpp"
#include "kforge/problem.hpp"
#include "kforge/registry.hpp"
#include "kforge/store.hpp"
#include "kforge/strategy.hpp"

namespace kf {

enum class stop_reason {
  evaluations,
  wall_time,
  simulated_time,
  strategy_finished,
  space_exhausted,
  interrupted
};
std::string_view to_string(stop_reason r) noexcept;

struct run_result {
  run_history history;
  stop_reason reason = stop_reason::evaluations;
  double clock_s = 0;       ///< the run's clock at the end (simulated or wall)
  double wall_s = 0;        ///< wall time of this invocation
  std::size_t resumed = 0;  ///< trials taken from the store instead of evaluated
  double setup_s = 0;       ///< creating the evaluator (run_experiment), before the run's clock starts
  std::filesystem::path folder;  ///< the run folder (run_experiment with a store)
};

/// Called after every committed trial (progress reporting).
using trial_callback = std::function<void(const trial&, const run_history&, const budget_spec&)>;

struct run_options {
  bool resume = false;          ///< continue the run in the output folder
  schedule_mode schedule = schedule_mode::continuous;  ///< run_experiment takes the spec's
  bool use_store = true;        ///< false: keep everything in memory (scoring, tests)
  trial_callback on_trial;      ///< may be empty
  std::ostream* log = nullptr;  ///< one-line notes (resume, stop reason); may be null
  /// When set (a SIGINT handler sets it), the loop stops before its next step with reason interrupted;
  /// trials still in flight are dropped, not committed, exactly as if the process had been killed, so
  /// --resume continues the run as if it had never stopped. May be null.
  const std::atomic<bool>* interrupt = nullptr;
  /// run_experiment: when set, builds the evaluator instead of the registry (the distributing evaluator
  /// of `mpirun -np N kforge run`, which runs the configured one on the other processes). The run's
  /// fingerprint still names the configured evaluator, so such a run resumes with or without MPI.
  std::function<evaluator(const evaluator_context&)> make_evaluator;
  /// run_loop: configurations evaluated first (valid, distinct), in order, before the strategy is asked
  /// for anything; the strategy observes their trials like its proposals and never proposes them again
  /// (they are seen). run_experiment takes the spec's `start`.
  std::vector<config> start;
};

/// What identifies a run, for resuming it: the problem (kind and space), strategy and evaluator (types
/// and options; options naming existing files as canonical paths), seed, batch size and schedule.
nlohmann::json experiment_fingerprint(const experiment_spec& spec);

/// The folder of a run of `spec`: spec.output when given; else, without `resume`, a fresh folder under
/// runs/ (create_run_folder); with `resume`, the latest unfinished run of this experiment (same
/// fingerprint) under runs/, or a config_error (exit 2) saying that there is none. Notes go to `log`.
std::filesystem::path choose_run_folder(const experiment_spec& spec, bool resume, std::ostream* log);

/// Runs an experiment. Misuse (bad options, a strategy breaking its contract, a store from another
/// experiment) throws kf::error; failing variants are trials. With a store: the folder is
/// choose_run_folder()'s, locked for the run's life (run_lock: a second process is refused at once);
/// --resume needs a stored run there whose fingerprint matches (the refusal says what differs); an
/// evaluator that cannot start is recorded as the run's "failed" record; an interrupted run records
/// "interrupted" instead of "finished".
run_result run_experiment(const experiment_spec& spec, const run_options& opts);

/// The loop itself, for callers that build the pieces (scoring, tests, benchmarks). `store` may be null.
run_result run_loop(const search_space& space, strategy& strat, evaluator& eval, const budget_spec& budget,
                    std::uint64_t seed, std::size_t batch_size, run_store* store, const run_options& opts);

}  // namespace kf
