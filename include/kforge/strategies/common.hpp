// Helpers shared by the built-in strategies.
#pragma once

#include <cstddef>
#include <cstdint>
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

/// The alternatives of a space (the implementations of a tensor_core site, say): an unordered parameter
/// whose values split the valid set into strata such that
///  (a) in some stratum another parameter that takes several values across the valid set is pinned to
///      one value (choosing one implementation pins the other implementations' own parameters), and
///  (b) the smallest stratum holds less than a quarter of an equal share (1 / (4 k) of the valid set for
///      k non-empty strata): there a uniform draw would rarely reach that alternative.
/// Balanced choices (a read-only mode, say) are not alternatives by (b), whatever they pin.
struct alternative_strata {
  std::size_t param = 0;                            ///< the choosing parameter
  std::vector<std::uint32_t> values;                ///< its value index per non-empty stratum
  std::vector<std::vector<std::uint32_t>> members;  ///< positions in space.valid(), per stratum
};

/// Every alternative of the space, in parameter order. Empty when the space has none, when its valid set
/// is not yet enumerated and its cartesian size exceeds 1e9 or 1000 unconstrained draws estimate more than
/// `max_valid` valid configurations, or when it holds more than `max_valid` (the strata list every member).
std::vector<alternative_strata> find_alternatives(const search_space& space,
                                                  std::size_t max_valid = 4'000'000);

/// A uniformly drawn configuration of stratum `k` of `a` that is not seen and not in `also`; nullopt
/// when the stratum is exhausted.
std::optional<config> draw_unseen_in(const search_state& s, const alternative_strata& a, std::size_t k,
                                     rng& r, const std::vector<config>& also = {});

/// Whether a value is an integer power of two (1, 2, 4, ...); false for non-integers and booleans.
bool is_power_of_two(const value& v) noexcept;

/// The parameters whose alignment a model should see: parameters of positive integers (sizes) with at
/// least three values, some of them powers of two and some not (block sizes 16, 32, 48, ..., 256, say).
/// Memory transactions, warps and wavefronts make power-of-two sizes behave alike and unlike their neighbours
/// by index (measured on benchmark_hub's convolution: without shared memory, block widths 32/64/128/256 run
/// 1.0-1.2x the optimum and 48/96/240 3-5x), which a smooth kernel over the index cannot express.
std::vector<std::size_t> power_of_two_params(const search_space& space);

/// Fitness of a trial for minimisation: its time, or +infinity when it failed.
double fitness(const trial& t) noexcept;

/// Registers random, ga and the other built-in strategies.
void register_builtin_strategies();

}  // namespace kf::strategies
