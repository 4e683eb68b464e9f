// kf::mpi::channel: point-to-point messages between the processes (ranks) of a distributed run. The
// coordinator (rank 0) and the serve loop (every other rank) speak only through this interface, so that
// they can be tested in one process (tests/unit/mpi_coordinator_test.cpp) and run over MPI
// (backend/mpi_channel.cpp) unchanged.
//
// Contract: neither call blocks on a peer. send() queues a message and returns; a message to a dead or
// hung peer is lost without an error (the coordinator notices the peer's silence instead). poll()
// returns a message that has fully arrived, or nothing at once. Messages from one sender arrive in the
// order sent. A transport that is itself broken throws kf::error.
#pragma once

#include <optional>
#include <string>

#include "evaluators/mpi/wire.hpp"

namespace kf::mpi {

struct message {
  int source = 0;
  tag kind = tag::stop;
  std::string body;  ///< one JSON object (wire.hpp)
};

class channel {
 public:
  virtual ~channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void send(int dest, tag kind, std::string body) = 0;
  virtual std::optional<message> poll() = 0;
};

/// The host name this process runs on (what trials record before the device).
std::string host_name();

}  // namespace kf::mpi
