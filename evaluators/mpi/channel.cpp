#include "evaluators/mpi/channel.hpp"

#include <unistd.h>

namespace kf::mpi {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

}  // namespace kf::mpi
