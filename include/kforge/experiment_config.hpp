// kf::experiment_spec: an experiment config (YAML or JSON), read and validated.
//
// Keys: name, problem, strategy, evaluator, budget, seed, output, batch_size, schedule, start, transfer,
// plugins (README.md shows one and says what `start` does; transfer: docs/transfer.md; plugins:
// shared-library plug-ins to load first, docs/plugins.md).
// Every problem is reported as a kf::config_error naming the file, the line, the key path and the reason;
// plug-in options are checked against their registry's option table before anything runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/problem.hpp"
#include "kforge/registry.hpp"
#include "kforge/transfer.hpp"

namespace kf {

/// When the loop proposes: `continuous` refills the evaluator's in-flight set as results arrive (the
/// strategy sees the configurations still in flight); `batches` waits for a whole batch first.
enum class schedule_mode { continuous, batches };

struct budget_spec {
  std::optional<std::size_t> evaluations;
  std::optional<double> wall_seconds;
  std::optional<double> simulated_seconds;
  /// After the wall-time budget, how long trials in flight may still finish; those still running then are
  /// dropped as on an interrupt (not stored: a --resume with a larger budget evaluates them). Unset: 10% of
  /// wall_seconds, at least 5 s.
  std::optional<double> wall_grace_seconds;
  /// The wall-time budget counts the evaluator's start-up too (workers started and greeted, references
  /// compiled or run): the loop gets wall_seconds minus the set-up time. For budgets that must bound a
  /// GPU's whole occupation (TritonBench-G's 30 s per operator).
  bool wall_includes_setup = false;
  bool unlimited() const noexcept { return !evaluations && !wall_seconds && !simulated_seconds; }
  double wall_grace() const noexcept {
    return wall_grace_seconds.value_or(std::max(5.0, 0.1 * wall_seconds.value_or(0.0)));
  }
};

/// A validated experiment configuration.
struct experiment_spec {
  std::string name;
  std::string file;  ///< the config file it came from
  problem prob;
  plugin_spec strategy;
  plugin_spec evaluator;
  budget_spec budget;
  std::uint64_t seed = 0;
  std::filesystem::path output;           ///< run folder; empty: chosen when the run starts
  std::optional<std::size_t> batch_size;  ///< proposals in flight (default: the evaluator's parallelism)
  schedule_mode schedule = schedule_mode::continuous;
  std::filesystem::path base_dir;
  nlohmann::json raw;  ///< the config as read, recorded with the run
  /// `transfer:` recordings of the same kernel measured elsewhere (resolved paths), and their records
  /// bound to prob.space (null without transfer); the strategy gets them through set_transfer().
  std::vector<std::string> transfer;
  std::shared_ptr<const transfer_data> transfer_records;
  std::vector<std::string> plugins;  ///< shared-library plug-ins it loaded (resolved paths), in order
  /// `start:` configurations evaluated first, before the strategy proposes anything, and observed by the
  /// strategy like its own proposals (`default`: the problem's default configuration,
  /// kf::default_configuration; or {parameter: value} mappings). Valid and pairwise distinct. Empty: the
  /// strategy alone decides what is evaluated.
  std::vector<config> start;
};

/// Loads the plug-ins listed under `key` of `doc` (a list of shared-library paths, relative to the file;
/// absent: none) and returns their resolved paths. Errors are config_errors at key[i].
std::vector<std::string> load_config_plugins(const document& doc, const std::string& key);

/// Reads and validates an experiment config (YAML or JSON; "embedded:<name>" for embedded ones).
/// Throws kf::config_error naming the file, the key path and the reason.
experiment_spec load_experiment(const std::string& path);
/// The same from an already parsed document.
experiment_spec parse_experiment(const document& doc);

}  // namespace kf
