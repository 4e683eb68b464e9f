// kf run folders: how a run's folder is named, locked while the run lives, and found again to resume.
//
// A run folder holds one run (run.sqlite, see store.hpp) and a `lock` file. Folders that kforge names
// itself live under runs/ in the working directory: <name>-<YYYYmmdd-HHMMSS>-s<seed>, with -2, -3, ...
// appended when taken; each is created with one mkdir, so concurrent runs never share one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kf {

/// Where runs without an `output:` go, relative to the working directory.
inline const std::filesystem::path default_runs_root = "runs";

/// Creates and returns a fresh folder under `root` (created too) for a run of experiment `name` with
/// `seed`. Never returns an existing folder; throws kf::error naming the folder when none can be made.
std::filesystem::path create_run_folder(const std::filesystem::path& root, const std::string& name,
                                        std::uint64_t seed);

/// An exclusive advisory lock on a run folder: flock() on <folder>/lock, which also holds the holder's
/// pid. Held while the object lives; the kernel releases it when the process ends in any way, so a
/// kill -9 never leaves a stale lock.
class run_lock {
 public:
  /// Takes the lock at once, or throws kf::error "run folder F in use by pid N". Creates the folder.
  explicit run_lock(const std::filesystem::path& folder);
  ~run_lock();
  run_lock(const run_lock&) = delete;
  run_lock& operator=(const run_lock&) = delete;

  /// The pid holding `folder`'s lock; nullopt when nobody holds it (or there is no lock file).
  /// Needs only read access to the folder.
  static std::optional<long> holder(const std::filesystem::path& folder);

 private:
  int fd_ = -1;
};

/// A run found under a runs root.
struct found_run {
  std::filesystem::path folder;
  bool finished = false;
  std::string created_at;  ///< ISO 8601 (UTC), from the store; the folder's time where absent
  std::size_t trials = 0;
};

/// The runs directly under `root` whose fingerprint is the same run as `fingerprint` (same_run()),
/// latest first. Folders that are not readable run stores are skipped.
std::vector<found_run> find_runs(const std::filesystem::path& root, const nlohmann::json& fingerprint);

/// Canonical form of a run fingerprint (experiment_fingerprint): every string among the evaluator's
/// options that names an existing file or folder, resolved against `base_dir` (the config's folder),
/// becomes its canonical path, so that the same recording named by a relative or an absolute path is
/// the same run.
nlohmann::json canonical_fingerprint(nlohmann::json fingerprint, const std::filesystem::path& base_dir);

/// Empty when the two (canonical) fingerprints identify the same run; else one line saying which of
/// problem, strategy, evaluator, seed, batch size and schedule differ, with the stored and the new
/// value, each cut to a few hundred characters.
std::string fingerprint_difference(const nlohmann::json& stored, const nlohmann::json& now);

}  // namespace kf
