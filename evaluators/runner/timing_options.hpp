// The adaptive timing protocol that every measuring worker follows (kforge-worker for kernels, the program
// worker for Python programs): warm-up, then timed runs until the 95% CI of the median is within a fraction
// or a time or count limit is met, each after an L2 flush. One source for the options both evaluators
// offer, their defaults, bounds and docs.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "kforge/options.hpp"

namespace kf {

/// The six timing options (warmup, min_repeats, max_repeats, target_rel_ci, max_timing_seconds, flush_l2),
/// their docs naming what is timed: `one` and `many` are its singular and plural ("launch", "launches"),
/// and `flush_buffer` what the L2 flush rewrites (each evaluator's worker sizes its own buffer).
std::vector<option_spec> timing_option_specs(const std::string& one, const std::string& many,
                                             const std::string& flush_buffer);

/// Misuse of those options that their bounds alone cannot catch (min_repeats above max_repeats); fails
/// through `o` with the key.
void check_timing_options(const options& o);

/// An option table assembled from shared parts, in the order given.
std::vector<option_spec> join_option_specs(std::initializer_list<std::vector<option_spec>> parts);

}  // namespace kf
