// Strategy "ga": a constraint-aware genetic algorithm.
//
// Defaults were chosen on the six benchmark_hub spaces (docs/benchmarks.md has the numbers and the
// command): a small steady-state population beat generational ones of 20 and 26 (Kernel Tuner's size).
// The initial population is drawn uniformly from the valid configurations. Each child comes from two
// parents chosen by rank-weighted selection, crossover, and per-gene mutation (to an adjacent value of
// an ordered parameter or to any other value); an invalid child is repaired by changing one gene to a
// value that makes it valid, else redrawn from the valid set. A child that was already measured costs
// nothing: it joins the offspring with its known time. The next generation keeps the `elites` best of
// the old one and fills up with the best offspring (replacement "generational"), or keeps the best of
// both together (replacement "plus"). Failed configurations have infinite time.
//
// Options (defaults in brackets):
//   population_size [10]     individuals in the population
//   crossover [uniform]      uniform | single_point | two_point
//   mutation_rate [0.15]     probability that a gene mutates
//   adjacent_mutation [0.5]  probability that a mutation of an ordered parameter moves one step
//   elites [2]               individuals carried over unchanged (generational replacement)
//   replacement [plus]       generational | plus
//   selection_pressure [1.5] rank weight exponent: weight of rank r (0 = best) is (N - r)^pressure
//   immigrants [0]           fraction of children drawn uniformly from the valid set instead of bred
//   generation_size [1]      children bred before the population is updated (0: population_size);
//                            1 with replacement "plus" is a steady-state GA
//   local_search [0]         fraction of children that are an unmeasured one-gene neighbour of the best
//                            individual (a memetic step: exploits the best basin directly)
//   transfer_initial [5]     with transfer (docs/transfer.md): members of the initial population taken
//                            from the records' best (the rest are uniform draws)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kforge/random.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transfer.hpp"

namespace kf::strategies {

struct genetic_options {
  std::size_t population_size = 10;
  std::string crossover = "uniform";
  double mutation_rate = 0.15;
  double adjacent_mutation = 0.5;
  std::size_t elites = 2;
  std::string replacement = "plus";
  double selection_pressure = 1.5;
  double immigrants = 0.0;
  std::size_t generation_size = 1;  // 0: population_size
  double local_search = 0.0;
  std::size_t transfer_initial = 5;
};

/// A child of parents a and b: crossover (opt.crossover) then per-gene mutation (opt.mutation_rate,
/// opt.adjacent_mutation); a child equal to a parent gets one gene moved. Shared by "ga" and "hybrid".
config breed_child(const search_space& space, const config& a, const config& b, const genetic_options& opt, rng& r);
/// Makes `c` valid by changing one gene (genes in random order, a random valid value); false when no
/// single change does.
bool repair_config(const search_space& space, config& c, rng& r);

class genetic {
 public:
  explicit genetic(genetic_options o = {}) : opt_(std::move(o)) {}

  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state& s, std::span<const trial> done);
  bool finished(const search_state& s) const;
  void set_transfer(std::shared_ptr<const transfer_data> t);

 private:
  struct member {
    config cfg;
    double fit;
  };
  std::optional<config> best_neighbour(const search_state& s, const std::vector<config>& taken);
  const member& select_parent();
  void next_generation();
  std::size_t generation_size() const noexcept {
    return opt_.generation_size ? opt_.generation_size : opt_.population_size;
  }

  genetic_options opt_;
  rng rng_{0};
  std::vector<member> population_;  // sorted best first
  std::vector<member> offspring_;   // evaluated (or known) children of the current generation
  std::set<config> awaiting_;       // its proposals not yet observed
  bool exhausted_ = false;
  transfer_prior prior_;
  std::size_t from_prior_ = 0;  // initial members taken from the prior so far
};

void register_genetic();

}  // namespace kf::strategies
