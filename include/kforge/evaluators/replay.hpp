// The replay evaluator: evaluates configurations by looking them up in a recorded space.
//
// A trial carries the recorded status, time (median of the recorded runs) and spread, metrics
// (counters of KTT recordings), and charges the recorded compile + verification + benchmark +
// framework + strategy time to the run's simulated clock, as Kernel Tuner's simulation mode does. A
// configuration that the recording lacks is an invalid trial that costs nothing.
#pragma once

#include <memory>
#include <string>

#include "kforge/evaluator.hpp"
#include "kforge/recorded.hpp"

namespace kf {

class replay_evaluator {
 public:
  /// `latency_ms`: real time each evaluation takes (a sleep), to exercise schedulers, progress output and
  /// kill/resume on a realistic time scale; 0 (the default) replays as fast as possible.
  replay_evaluator(std::shared_ptr<const recorded_file> file, const search_space& space,
                   std::size_t parallelism = 1, double latency_ms = 0);

  std::vector<trial> evaluate(std::span<const evaluation_request> batch) const;
  std::size_t parallelism() const noexcept { return parallelism_; }
  bool simulated_clock() const noexcept { return true; }
  /// Includes "recorded_optimum": the best correct recorded configuration of the space (what a report
  /// compares a run's best with).
  nlohmann::json describe() const;

  /// Coverage: valid configurations of the space without a record, and records outside the space.
  std::size_t unrecorded_valid() const noexcept { return unrecorded_valid_; }
  std::size_t records_outside_space() const noexcept { return bound_->unmatched; }

 private:
  std::shared_ptr<const recorded_file> file_;
  std::shared_ptr<const bound_records> bound_;
  std::size_t parallelism_;
  double latency_ms_ = 0;
  std::size_t unrecorded_valid_ = 0;
  std::string device_;
  nlohmann::json optimum_;  ///< the best correct record in the space: {time_ms, configuration}; null if none
};

void register_replay_evaluator();

}  // namespace kf
