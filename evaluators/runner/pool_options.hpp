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

}  // namespace kf
