// kf::mpi::serve: the loop of every rank but rank 0 in a distributed run. The rank owns its host's
// GPUs: it builds the experiment's configured evaluator itself (the cuda evaluator with --devices as
// given on this host, or every GPU it sees; a replay), so compilation runs on its own cores and
// measurement in its own worker processes; rank 0 only sends it requests.
//
//   wait for start (the run folder) -> build the evaluator -> hello (its description, or why it failed)
//   -> until stop: take work -> feed the evaluator (up to its parallelism in flight) -> send back finished
//      trials (device prefixed with this host) -> heartbeat every heartbeat_s
//   -> bye (the evaluator is stopped) -> wait for end: whether this process takes part in MPI_Finalize
//
// A synchronous evaluator (replay) is fed one request at a time, so the loop answers and sends heartbeats
// between evaluations: a rank is silent no longer than its longest single evaluation.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#include "evaluators/mpi/channel.hpp"
#include "kforge/experiment_config.hpp"

namespace kf::mpi {

struct serve_options {
  /// Builds the rank's evaluator (tests); default: the registry, from the experiment's evaluator.
  std::function<evaluator(const evaluator_context&)> make_evaluator;
  std::string host;             ///< default: host_name()
  std::ostream* log = nullptr;  ///< notes (the evaluator broke); may be null
  /// Set from rank 0's end message: whether every rank takes part in MPI_Finalize (false once a rank was
  /// lost; also false when no end came in time). May be null.
  bool* finalize = nullptr;
};

/// Serves rank 0 until it says stop. Returns the process's exit status: 0, or 1 when this rank's
/// evaluator could not start or broke (rank 0 was told and went on without it).
int serve(channel& ch, const experiment_spec& spec, const serve_options& o = {});

}  // namespace kf::mpi
