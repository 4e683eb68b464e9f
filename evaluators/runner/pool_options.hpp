// The worker pool's options that every evaluator driving a runner offers (the cuda evaluator's
// kforge-workers, the program evaluator's Python workers): which GPUs, how many workers per GPU, when a
// silent worker is killed, how often a job whose worker died is dispatched again. One source for their
// names, defaults, bounds and docs, and for reading them into runner_options.
#pragma once

#include <string>
#include <vector>

#include "evaluators/runner/runner.hpp"
#include "kforge/options.hpp"

namespace kf {

/// devices, workers_per_device, request_timeout_s (default `timeout_s`, documented as `timeout_doc`),
/// retry_lost.
std::vector<option_spec> pool_option_specs(double timeout_s, const std::string& timeout_doc);

/// Reads those options into `run` (devices only when given). Returns true when `devices` was not given:
/// the evaluator then uses every GPU its workers see. Fails through `o` with the key on misuse.
bool read_pool_options(const options& o, runner_options& run);

/// Sets run.devices to 0 .. n-1, n the count that `count_command` (a shell command: the worker with
/// --count) prints; none is an error that says `none_visible`.
void use_every_visible_device(runner_options& run, const std::string& count_command,
                              const std::string& none_visible);

}  // namespace kf
