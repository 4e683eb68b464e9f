// A build without MPI (Open MPI's C API was not found when kforge was configured): a distributed run is
// refused with what to do instead.
#include "kforge/error.hpp"
#include "kforge/evaluators/mpi.hpp"

namespace kf::mpi {

bool available() noexcept {
  return false;
}

struct session::impl {};

session::session(options) {
  throw config_error(
      "command line", "mpirun",
      "this kforge was built without MPI (Open MPI's development files were not found when it was "
      "configured), so it cannot run as " +
          std::to_string(launched_size()) +
          " processes: install libopenmpi-dev and openmpi-bin (scripts/install-deps) and rebuild "
          "(scripts/build), or run kforge without mpirun/srun");
}

session::~session() = default;

int session::rank() const {
  return 0;
}

int session::size() const {
  return 1;
}

int session::serve(const experiment_spec&) {
  return 1;
}

std::function<evaluator(const evaluator_context&)> session::evaluator_factory(const experiment_spec&) {
  return nullptr;
}

void session::set_exit_status(int) {}

}  // namespace kf::mpi
