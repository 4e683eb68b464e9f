// Bottleneck-guided operators (issue 15 item 1): the TritonForge loop without an LLM. A variant's
// profiling and static metrics classify its bottleneck; a mutation operator changes only the genes of
// one family (tile and coarsening, vector width, block shape, ...); a contextual bandit (Thompson
// sampling over Beta posteriors, one per bottleneck and family) learns during the run which family
// improves a parent with which bottleneck, rewarded by improvement. The expert biases (vectorise and
// coarsen when memory-bound, block shape and register caps when occupancy-limited, ...) enter only as a
// weak prior (`prior_strength` pseudo-successes), so the run's own outcomes decide.
//
// Families are read from parameter names (case-insensitive keywords, first match wins; docs/benchmarks.md
// lists them); a parameter that matches none is "other". Contract: mutate() returns a configuration
// that differs from the parent in at least one gene of the chosen family when the family has a gene
// with two or more values, valid when a valid one exists within that family (else the parent's other
// genes are repaired), and every random choice comes from the rng passed in.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kforge/random.hpp"
#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf::strategies {

enum class bottleneck : std::uint8_t { unknown, memory, occupancy, latency, compute };
inline constexpr std::size_t bottleneck_count = 5;
std::string_view to_string(bottleneck b) noexcept;

/// The bottleneck of a measured variant from its metrics (CUPTI names as the cuda evaluator and KTT
/// record them; static.* from the compiler): memory when DRAM or L2 throughput is at least 60% of
/// peak; occupancy when achieved occupancy (or static occupancy) is below 50% or registers spill;
/// compute when the SM / issue / FMA pipe is at least 60% busy; latency when none of these is (neither
/// unit is busy: stalls); unknown without metrics or for a failed trial.
bottleneck classify_bottleneck(const trial& t);

enum class operator_family : std::uint8_t { parallelism, coarsening, vectorisation, unrolling, memory, registers, other };
inline constexpr std::size_t family_count = 7;
std::string_view to_string(operator_family f) noexcept;

/// The family of each parameter of the space (by name).
std::vector<operator_family> parameter_families(const search_space& space);

class operator_bandit {
 public:
  operator_bandit() = default;
  /// prior_strength: pseudo-successes added to the expert-favoured (bottleneck, family) pairs.
  operator_bandit(const search_space& space, double prior_strength);

  /// A family for a parent with bottleneck b, by Thompson sampling; nullopt when no family has a
  /// parameter with two or more values.
  std::optional<operator_family> choose(bottleneck b, rng& r) const;
  /// Records whether a child made by family f from a parent with bottleneck b beat its parent.
  void reward(bottleneck b, operator_family f, bool improved);
  /// The parent with one or two genes of family f changed (an adjacent step of an ordered parameter
  /// half the time, else any other value), then repaired.
  config mutate(const search_space& space, const config& parent, operator_family f, rng& r) const;
  /// Posterior mean of the success probability (for reports and tests).
  double success_rate(bottleneck b, operator_family f) const;

 private:
  std::vector<operator_family> family_of_;                // per parameter
  std::array<std::vector<std::size_t>, family_count> genes_{};  // mutable genes per family
  std::array<std::array<double, family_count>, bottleneck_count> alpha_{}, beta_{};
};

}  // namespace kf::strategies
