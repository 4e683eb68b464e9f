// kf::run_history: the trials of one run, in sequence order, with O(1) "already measured?" lookups.
#pragma once

#include <cstddef>
#include <span>
#include <unordered_map>
#include <vector>

#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

class run_history {
 public:
  run_history() = default;

  /// Appends a trial. Precondition: its configuration is not yet in the history (checked: kf::error).
  void add(trial t);

  std::span<const trial> trials() const noexcept { return trials_; }
  std::size_t size() const noexcept { return trials_.size(); }
  bool empty() const noexcept { return trials_.empty(); }

  bool measured(const config& c) const { return index_.count(c) != 0; }
  /// The trial of `c`, or nullptr.
  const trial* find(const config& c) const;

  /// The ok trial with the lowest time (the first one on ties), or nullptr when none is ok.
  const trial* best() const noexcept { return best_ < trials_.size() ? &trials_[best_] : nullptr; }
  std::size_t count(status s) const noexcept { return counts_[static_cast<std::size_t>(s)]; }

 private:
  std::vector<trial> trials_;
  std::unordered_map<config, std::size_t, config_hash> index_;
  std::size_t best_ = static_cast<std::size_t>(-1);
  std::size_t counts_[status_count] = {};
};

}  // namespace kf
