// kf::run_store: the SQLite database of one run (run folder/run.sqlite).
//
// Contract: commit() writes one trial in one transaction; once it returns, the trial survives the
// process being killed (SIGKILL) at any later point. A run folder holds one run; `--resume` reopens it
// and the experiment replays the stored trials through the strategy before evaluating new ones.
// Not thread safe: one run_store per thread.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

/// How a run store is opened: `read_write` by the run itself (creates the folder and the schema),
/// `read_only` by readers (report, export, runs, compare): no write, no WAL pragma, works on a folder
/// the reader cannot write (an archive, a colleague's run).
enum class store_access { read_write, read_only };

class run_store {
 public:
  /// Opens dir/run.sqlite. read_write creates the folder and the schema when absent. read_only throws
  /// kf::error naming the file when it is missing, empty, not a database or not a kforge run store; a
  /// store whose folder cannot be written is read as it is (with a write-ahead log left by a killed run:
  /// from a private copy, so that no committed trial is missed).
  explicit run_store(const std::filesystem::path& dir, store_access access = store_access::read_write);
  ~run_store();
  run_store(run_store&&) noexcept;
  run_store& operator=(run_store&&) noexcept;

  const std::filesystem::path& dir() const noexcept;
  std::filesystem::path database_path() const;

  /// Run-level records (the experiment spec, the space, the evaluator's description, ...).
  void set_meta(const std::string& key, const nlohmann::json& v);
  nlohmann::json meta(const std::string& key) const;  ///< null when absent
  bool has_meta(const std::string& key) const;

  /// Writes one trial atomically. Throws kf::error when its sequence or configuration is stored already.
  void commit(const trial& t);
  /// Commits every trial of `group` in one transaction: after a kill the store holds all of them or none
  /// (the loop commits the trials a strategy observes together as one group, so that a resumed run sees
  /// the same groups). Throws kf::error and leaves none of them when one cannot be written.
  void commit(std::span<const trial> group);
  /// Every stored trial, by sequence.
  std::vector<trial> trials() const;
  std::size_t trial_count() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A self-contained description of a space's parameters (names, types, values), stored with a run so
/// that exports and reports need no access to the original files.
nlohmann::json describe_space(const search_space& space);
/// Rebuilds a constraint-free space with the described parameters.
search_space space_from_description(const nlohmann::json& d);
/// The space a store describes (its "space" record); kf::error naming the file when it is missing or
/// damaged (a store whose run never started has none).
search_space stored_space(const run_store& store);

/// Exports of a run's trials. `space` gives parameter names and values.
enum class export_format { jsonl, csv, t4, kernel_tuner };
std::optional<export_format> export_format_from_string(std::string_view s);
void export_trials(const std::vector<trial>& trials, const search_space& space, export_format fmt,
                   std::ostream& out, const nlohmann::json& run_meta = {});

}  // namespace kf
