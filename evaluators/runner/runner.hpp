// kf::runner: a pool of worker processes that measure jobs (the second half of an evaluator; TVM
// MetaSchedule's Runner). It spawns the workers, greets each one, dispatches jobs to idle workers in
// submission order, restarts a worker that dies, hangs or says its state is lost, and re-dispatches a job
// whose worker died without a word. It knows nothing of compilers, kernels or evaluators: a job is a JSON
// message, an outcome is the worker's JSON answer (or why there is none).
//
// Data flow:
//
//   submit(job) -> ready queue -> idle worker (stdin: one JSON line) -> answer (stdout: one JSON line)
//                                      |                                   |
//                                      +-- died / silent past the timeout -+--> on_outcome(run_outcome)
//
// Wire protocol (one JSON object per line, both directions; stderr goes to the worker's log file):
//   runner -> worker  {"op":"hello"}                 worker -> runner  its description, or {"error": why}
//                     {"op": ..., "id": N, ...}      worker -> runner  {"id": N, ..., "fatal": bool}
//                     {"op":"exit"}
// An answer with "fatal": true is the worker's last (its device state is unusable): the runner starts a
// fresh one. Any program that speaks this protocol can be a worker (kforge-worker for CUDA images; a
// Python worker for Triton programs).
//
// Threads: the runner owns one thread that polls the workers; callbacks run on it and must not call back
// into the runner. submit() and the accessors may be called from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/trial.hpp"

namespace kf {

struct runner_options {
  /// The worker's command line; "{device}" in any element is replaced by the worker's device index.
  std::vector<std::string> command;
  std::vector<int> devices{0};
  int workers_per_device = 1;
  std::filesystem::path log_dir;   ///< one log file per worker slot (the workers' stderr)
  double hello_timeout_s = 120;    ///< a worker must greet within this time
  double request_timeout_s = 300;  ///< a worker silent this long on a job is killed (timeout)
  int retry_lost = 1;              ///< dispatches again of a job whose worker died unannounced
};

/// What became of one job.
struct run_outcome {
  std::uint64_t id = 0;
  nlohmann::json answer;     ///< the worker's answer; null when the worker was lost
  status lost = status::ok;  ///< crashed (died) or timeout (silent) when there is no answer
  std::string error;         ///< why the worker was lost: exit status or signal, and its log's tail
  int losses = 0;            ///< dispatches of this job that ended with the worker lost
  std::string first_loss;    ///< why the worker was lost the first time (kept when a retry answered)
  std::size_t worker = 0;    ///< the slot that answered or was lost (see describe())
  int device = 0;
  double queue_s = 0;      ///< submitted -> dispatched (waiting for a free worker)
  double on_worker_s = 0;  ///< dispatched -> answered (the round trip: IPC plus the worker's work)
};

class runner {
 public:
  struct callbacks {
    std::function<void(run_outcome)> on_outcome;  ///< every submitted job ends in exactly one outcome
    std::function<void()> on_failure;             ///< every worker is broken: see failure()
  };
  /// Starts every worker (all processes at once) and waits for each greeting. Throws kf::error when none
  /// starts (the reasons of each); a worker that does not start is left out and reported by describe().
  runner(runner_options o, callbacks cb);
  ~runner();
  runner(const runner&) = delete;
  runner& operator=(const runner&) = delete;

  /// Queues a job; `message` must hold "op" and a unique "id". Throws kf::error after failure().
  void submit(std::uint64_t id, nlohmann::json message);
  /// Jobs submitted and not yet ended.
  std::size_t in_flight() const;
  /// Worker slots (started or broken).
  std::size_t size() const;
  /// The greeting of the first live worker (the device it serves).
  nlohmann::json greeting() const;
  /// Not empty once every worker is broken and none could be restarted.
  std::string failure() const;
  /// Per worker: device, greeting, restarts, busy seconds, broken state.
  nlohmann::json describe() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The number a worker program prints for `shell_command` (e.g. "'kforge-worker' --count"): the GPUs it
/// sees. 0 when the command cannot run or prints no number; its stderr is discarded. An evaluator cannot ask
/// the driver itself (no CUDA outside the worker), so it asks the worker it is about to spawn.
int count_worker_devices(const std::string& shell_command);

}  // namespace kf
