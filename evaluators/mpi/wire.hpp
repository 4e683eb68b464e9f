// What travels between the ranks of a distributed run (docs/distributed.md): every message is one JSON
// object, sent as a string of chars under a tag that says its kind. This file is the one place where a
// trial and an evaluation request get a JSON form for the wire.
//
//   rank 0 -> rank r   start {run_dir, heartbeat_s, rank_timeout_s}   work {requests: [request...]}
//                      stop {}   end {finalize}  (after every goodbye: whether all take part in MPI_Finalize)
//   rank r -> rank 0   hello {rank, host, pid, version, fingerprint, evaluator, devices, parallelism,
//                             simulated_clock} or {rank, host, pid, error}
//                      trials {trials: [trial...]}     heartbeat {in_flight[, evaluator]}
//                      failed {error}                  bye {}
//
// A request is {sequence, batch, cfg: [index...]}; a trial carries every field of kf::trial, its
// configuration as indices (both sides hold the same space), doubles exactly (shortest round-trip form),
// NaN as null and infinities as "inf" / "-inf".
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/evaluator.hpp"
#include "kforge/trial.hpp"

namespace kf::mpi {

/// Message kinds; the values are the MPI tags.
enum class tag : int {
  start = 1,
  hello = 2,
  work = 3,
  trials = 4,
  heartbeat = 5,
  failed = 6,
  stop = 7,
  bye = 8,
  end = 9
};
std::string_view to_string(tag t) noexcept;

nlohmann::json to_json(const evaluation_request& r);
/// Throws kf::error naming the missing or mistyped field.
evaluation_request request_from_json(const nlohmann::json& j);

nlohmann::json to_json(const trial& t);
/// Throws kf::error naming the missing or mistyped field.
trial trial_from_json(const nlohmann::json& j);

/// The device models an evaluator's description names: its workers' GPU names ("workers": [{name}], the
/// cuda evaluator), else its "device" (a replay's recording device); what ranks must agree on.
std::vector<std::string> device_names(const nlohmann::json& describe);

/// Parses a message body; throws kf::error saying which kind of message from which rank was unreadable.
nlohmann::json parse_body(const std::string& body, tag kind, int source);

}  // namespace kf::mpi
