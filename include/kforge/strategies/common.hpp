// Helpers shared by the built-in strategies.
#pragma once

#include <optional>
#include <vector>

#include "kforge/random.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transfer.hpp"

namespace kf::strategies {

/// A uniformly drawn valid configuration that is not seen (measured or pending) and not in `also`,
/// or nullopt when none is left. Tries random draws first, then scans the valid set from a random
/// offset, so it terminates on exhausted spaces.
std::optional<config> draw_unseen(const search_state& s, rng& r, const std::vector<config>& also = {});

/// The first configuration of prior.ranked() (best by other GPUs' records) that is valid, not seen and
/// not in `also`; nullopt when the prior is empty or exhausted.
std::optional<config> best_unseen_by_prior(const search_state& s, const transfer_prior& prior,
                                           const std::vector<config>& also = {});

/// Fitness of a trial for minimisation: its time, or +infinity when it failed.
double fitness(const trial& t) noexcept;

/// Registers random, ga and the other built-in strategies.
void register_builtin_strategies();

}  // namespace kf::strategies
