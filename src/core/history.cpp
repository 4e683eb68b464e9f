#include "kforge/history.hpp"

#include "kforge/error.hpp"

namespace kf {

void run_history::add(trial t) {
  if (!index_.emplace(t.cfg, trials_.size()).second)
    throw error("internal: configuration measured twice (sequence " + std::to_string(t.sequence) + ")");
  ++counts_[static_cast<std::size_t>(t.st)];
  if (t.ok() && (best_ >= trials_.size() || t.time_ms < trials_[best_].time_ms)) best_ = trials_.size();
  trials_.push_back(std::move(t));
}

const trial* run_history::find(const config& c) const {
  auto it = index_.find(c);
  return it == index_.end() ? nullptr : &trials_[it->second];
}

}  // namespace kf
