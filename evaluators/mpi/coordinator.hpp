// kf::mpi::coordinator: rank 0's evaluator in a distributed run. It evaluates nothing itself (unless it
// is given rank 0's own evaluator): it hands requests to the other ranks, each of which runs the
// experiment's configured evaluator on its host (serve.hpp), and hands their trials back to the loop.
//
//   start -> every rank; greetings checked (same experiment, same kforge, one GPU model)
//   submit: queue -> dispatch to the rank with the most free capacity (a rank's capacity is its
//           evaluator's parallelism) -> work message
//   collect: pump messages (trials, heartbeats) -> a rank silent past rank_timeout_s, or whose
//            evaluator broke, is lost: its requests in flight go back to the head of the queue -> dispatch
//
// Determinism: with a simulated-clock evaluator (replay) each submit()'s trials are handed back together,
// once all of them are back, in submission order; the loop then sees exactly what a synchronous
// evaluator would give it, so the trial sequence equals the single-process one for a seed and batch size
// whichever rank measured what, and whichever ranks were lost. Wall-clock evaluators stream trials as
// they arrive, as the cuda evaluator does in one process.
#pragma once

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluators/mpi/channel.hpp"
#include "kforge/evaluator.hpp"

namespace kf::mpi {

struct coordinator_options {
  double rank_timeout_s = 60;      ///< a rank silent this long is lost (heartbeats come every heartbeat_s)
  double heartbeat_s = 1;          ///< sent to the ranks with start
  double startup_timeout_s = 600;  ///< every rank must greet within this (its evaluator starts first)
  bool allow_mixed_devices = false;
  nlohmann::json fingerprint;     ///< rank 0's experiment_fingerprint(): every rank must run the same
  std::filesystem::path run_dir;  ///< the run folder, sent with start (ranks keep their logs under it)
  std::ostream* log = nullptr;    ///< one line per lost rank
  std::set<int>* lost = nullptr;  ///< ranks lost are added here, for whoever ends the job (may be null)
};

class coordinator final : public async_evaluator {
 public:
  /// Sends start to every rank, builds rank 0's own evaluator with `make_local` (when given), and waits
  /// for every rank's greeting. Throws kf::error when a rank cannot start its evaluator, does not greet
  /// within startup_timeout_s, or runs another experiment or kforge; kf::config_error when the ranks' GPU
  /// models differ and allow_mixed_devices is false.
  coordinator(channel& ch, coordinator_options o,
              const std::function<std::optional<evaluator>()>& make_local = nullptr);

  void submit(std::vector<evaluation_request> requests) override;
  /// Throws kf::error once every rank (and rank 0's own evaluator) is lost with work left to do.
  std::vector<trial> collect(bool wait) override;
  std::size_t in_flight() const override;
  /// The sum of the live ranks' capacities.
  std::size_t parallelism() const override;
  /// The first rank's evaluator description (type, device, recorded optimum, ...), with "distributed":
  /// every rank's host, devices, capacity, trials, and why it was lost.
  nlohmann::json describe() const override;
  bool simulated_clock() const override { return simulated_; }

 private:
  using clock_type = std::chrono::steady_clock;
  struct slot {
    int rank = 0;  ///< 0: rank 0's own evaluator
    std::string host;
    long pid = 0;
    std::size_t capacity = 1;
    std::vector<std::string> devices;
    nlohmann::json evaluator;  ///< the rank's latest description
    std::set<std::uint64_t> assigned;
    clock_type::time_point last_heard;
    std::size_t trials = 0;
    std::string lost;  ///< why; empty while the rank serves
  };
  struct submission {
    std::size_t expected = 0;
    std::vector<trial> done;
  };

  void announce_start();
  void greet();
  void check_greetings(const std::map<int, nlohmann::json>& hellos, const std::vector<int>& silent);
  void check_devices() const;

  bool pump();
  void handle(const message& m);
  void accept(std::size_t s, trial t);
  void check_silence();
  void lose(std::size_t s, const std::string& why);
  void dispatch();
  std::vector<trial> take_ready();
  std::size_t live_slots() const;
  std::string name(const slot& s) const;

  channel& ch_;
  coordinator_options opt_;
  std::optional<evaluator> local_;
  std::vector<slot> slots_;             // rank 0's own evaluator first (if any), then ranks 1..n-1
  std::map<int, std::size_t> by_rank_;  // rank -> slot (remote ranks)
  bool simulated_ = false;

  std::map<std::uint64_t, evaluation_request> requests_;  // submitted, not yet back, by sequence
  std::map<std::uint64_t, std::size_t> owner_;            // sequence -> slot it was sent to
  std::deque<std::uint64_t> queue_;                       // submitted, not yet dispatched
  std::deque<submission> submissions_;                    // simulated clock: whole submissions, in order
  std::map<std::uint64_t, std::size_t> submission_of_;    // sequence -> index into the front of submissions_
  std::size_t submissions_done_ = 0;                      // handed back (index base of submissions_)
  std::size_t submissions_total_ = 0;
  std::vector<trial> ready_;  // wall clock: back, not yet collected
  std::size_t held_ = 0;      // simulated clock: back, waiting for their submission
  std::size_t reissued_ = 0;
  std::size_t late_ = 0;
  double idle_us_ = 0;
};

}  // namespace kf::mpi
