// Strategy "hybrid": a steady-state evolutionary search whose offspring are screened by a Gaussian
// process. Each proposal breeds `offspring` children from the population (crossover, mutation, repair;
// the operators of "ga") plus the unvisited one-parameter neighbours of the best configuration and
// `immigrants` uniformly drawn unvisited configurations; with probability `epsilon` a uniformly drawn
// candidate is evaluated (exploration), otherwise the one with the highest expected improvement under
// the GP (log-EI on log(time)). The immigrants let the GP reach regions that no single-gene mutation of
// the population can (e.g. a tensor-core implementation whose constraints pin several other
// parameters): the model picks one when its uncertainty there makes it worth a trial. Cheap per
// proposal (the GP scores only the candidates), so it also serves spaces too large to enumerate.
// Transfer (docs/transfer.md): the first `transfer_initial` configurations are the records' best, the
// GP sits on the records' prior mean (as in "bo"), and `transfer_immigrants` of the immigrants come
// from the best unvisited configurations by the prior (the first `transfer_pool` of them).
// Bottleneck-guided operators (operators: bandit; issue 15 item 1, include/kforge/strategies/operators.hpp):
// a `bandit_share` of the bred children are a parent with the genes of one family mutated, the family
// chosen by a contextual bandit from the parent's bottleneck (its metrics) and rewarded when the child,
// once evaluated, beats its parent; the GP screens them with the other children as before.
// Alternatives (alternatives: stratified, the default; find_alternatives in common.hpp): where a space
// offers alternative implementations whose constraints make one of them a small corner of the valid set
// (gemm_bf16's wgmma path: 1.2%; sgemm's tiled path: 0.06%), the initial design and the immigrants are
// drawn stratum by stratum, in a seeded round robin over the alternatives' values, uniformly within the
// stratum; the first k initial draws therefore cover all k implementations. Spaces without such a
// parameter (every recorded benchmark_hub and KTT space) are drawn uniformly, as with `uniform`.
// Alignment inputs (alignment_features, on by default; bayesian.hpp): the GP also sees, for each parameter of
// sizes that mixes powers of two with other values, whether the value is a power of two. Measured in replay
// (docs/benchmarks.md, "Alignment inputs"): +0.02, +0.04 and +0.11 P on benchmark_hub's three convolution
// spaces (100 seeds), -0.01 on the dedispersion ones, +0.01 on the held-out spaces.
// Options (defaults): population_size 10, offspring 64, immigrants 8, epsilon 0.1, initial_samples 10,
// refit_every 8, max_points 400, mutation_rate 0.2; transfer_initial 3, transfer_immigrants 4,
// transfer_pool 64, transfer_mean true, transfer_weight 0.5, transfer_strength 4; operators genetic
// (genetic, bandit), bandit_share 0.5, bandit_prior 1; alternatives stratified (stratified, uniform);
// alignment_features true.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "kforge/strategies/bayesian.hpp"
#include "kforge/strategies/common.hpp"
#include "kforge/strategies/genetic.hpp"
#include "kforge/strategies/operators.hpp"
#include "kforge/strategy.hpp"

namespace kf::strategies {

struct hybrid_options {
  std::size_t population_size = 10;
  std::size_t offspring = 64;
  std::size_t immigrants = 8;
  double epsilon = 0.1;
  std::size_t initial_samples = 10;
  std::size_t refit_every = 8;
  std::size_t max_points = 400;
  double mutation_rate = 0.2;
  bool alignment_features = true;
  std::size_t transfer_initial = 3;
  std::size_t transfer_immigrants = 4;
  std::size_t transfer_pool = 64;
  bool transfer_mean = true;
  double transfer_weight = 0.5;
  double transfer_strength = 4;
  std::string operators = "genetic";  ///< genetic | bandit
  double bandit_share = 0.5;
  double bandit_prior = 1.0;
  std::string alternatives = "stratified";  ///< stratified | uniform
};

class hybrid {
 public:
  explicit hybrid(hybrid_options o = {}) : opt_(o) {}
  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state& s, std::span<const trial> done);
  void set_transfer(std::shared_ptr<const transfer_data> t) { transfer_ = std::move(t); }

 private:
  /// Up to `count` unvisited configurations drawn from the first transfer_pool unvisited ones by the
  /// transfer prior (none without transfer).
  std::vector<config> prior_immigrants(const search_state& s, const std::vector<config>& taken,
                                       std::size_t count);
  /// An unseen configuration for the initial design or an immigrant: uniform over the valid set, or,
  /// with alternatives stratified, from the next (alternative, stratum) of a seeded round robin.
  std::optional<config> draw_fresh(const search_state& s, const std::vector<config>& taken);
  std::shared_ptr<const transfer_data> transfer_;
  std::vector<alternative_strata> strata_;                     // find_alternatives(space) when stratified
  std::vector<std::pair<std::size_t, std::size_t>> rotation_;  // (alternative, stratum), shuffled
  std::size_t rotation_next_ = 0;
  // Bottleneck-guided operators: the bandit, each observed configuration's bottleneck, and where each
  // proposed family-mutation child came from (rewarded when it is observed).
  struct origin {
    bottleneck context;
    operator_family family;
    double parent_fitness;
  };
  operator_bandit bandit_;
  std::map<config, bottleneck> bottleneck_of_;
  std::map<config, origin> origin_;
  hybrid_options opt_;
  rng rng_{0};
  std::unique_ptr<bayesian> model_;                    // the surrogate (its own proposal logic is not used)
  std::vector<std::pair<config, double>> population_;  // best first; fitness = time (inf when failed)
  genetic breeder_;
};

void register_hybrid();

}  // namespace kf::strategies
