// One search across hosts: `mpirun -np N kforge run CONFIG` (or `srun kforge run CONFIG`), see
// docs/distributed.md. Rank 0 runs the loop (strategy, store, budget) with an evaluator that hands
// requests to the other ranks (evaluators/mpi/coordinator.hpp); every other rank builds the configured
// evaluator on its own host and serves rank 0 (evaluators/mpi/serve.hpp). This header is all the CLI
// needs: it names no MPI type, and it exists in builds without MPI, where a session refuses to start.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>

#include "kforge/evaluator.hpp"
#include "kforge/experiment_config.hpp"

namespace kf::mpi {

/// How many processes the launcher that started this one started together, as the environment it sets
/// says: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_SIZE (MPICH's mpiexec, srun --mpi=pmi2),
/// SLURM_STEP_NUM_TASKS (an srun step); 1 when none is set. Reads the environment only; with MPI, the
/// session's size() is what counts.
int launched_size();

/// Whether this kforge was built with MPI (Open MPI's C API found when it was configured).
bool available() noexcept;

struct options {
  double rank_timeout_s = 60;        ///< a rank silent this long is lost; its variants go to others
  bool allow_mixed_devices = false;  ///< run even when the ranks' GPU models differ
  bool rank0_evaluates = false;      ///< rank 0 also runs the configured evaluator (its host's GPUs)
  std::ostream* log = nullptr;       ///< notes: lost ranks, how the job ends
};

/// This process's part in a distributed run. The constructor initialises MPI; the destructor ends it:
/// rank 0 tells every rank to stop and waits for their goodbyes, then all call MPI_Finalize; when a rank
/// was lost (it cannot take part in MPI_Finalize) rank 0 ends the job with MPI_Abort and the exit status
/// instead (set_exit_status), which also ends a hung rank.
class session {
 public:
  /// Throws config_error (exit status 2) when this kforge was built without MPI.
  explicit session(options o);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  int rank() const;
  int size() const;

  /// Ranks > 0: builds the experiment's evaluator and serves rank 0 until it says stop. Returns the
  /// process's exit status.
  int serve(const experiment_spec& spec);

  /// Rank 0: the factory of the distributing evaluator, for run_options::make_evaluator. It sends the
  /// run folder (the context's run_dir) to every rank, builds rank 0's own evaluator when
  /// options::rank0_evaluates, and waits for every rank's greeting.
  std::function<evaluator(const evaluator_context&)> evaluator_factory(const experiment_spec& spec);

  /// Rank 0: the exit status the process is about to return (MPI_Abort passes it on to the launcher).
  void set_exit_status(int status);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kf::mpi
