#include <cstdlib>
#include <string>

#include "kforge/evaluators/mpi.hpp"

namespace kf::mpi {

int launched_size() {
  int n = 1;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x > n && x < 1'000'000) n = static_cast<int>(x);
  }
  return n;
}

}  // namespace kf::mpi
