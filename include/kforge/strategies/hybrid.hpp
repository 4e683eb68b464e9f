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
// Options (defaults): population_size 10, offspring 64, immigrants 8, epsilon 0.1, initial_samples 10,
// refit_every 8, max_points 400, mutation_rate 0.2; transfer_initial 3, transfer_immigrants 4,
// transfer_pool 64, transfer_mean true, transfer_weight 0.5, transfer_strength 4.
#pragma once

#include <memory>

#include "kforge/strategies/bayesian.hpp"
#include "kforge/strategies/genetic.hpp"
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
  std::size_t transfer_initial = 3;
  std::size_t transfer_immigrants = 4;
  std::size_t transfer_pool = 64;
  bool transfer_mean = true;
  double transfer_weight = 0.5;
  double transfer_strength = 4;
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
  std::vector<config> prior_immigrants(const search_state& s, const std::vector<config>& taken, std::size_t count);
  std::shared_ptr<const transfer_data> transfer_;
  hybrid_options opt_;
  rng rng_{0};
  std::unique_ptr<bayesian> model_;                    // the surrogate (its own proposal logic is not used)
  std::vector<std::pair<config, double>> population_;  // best first; fitness = time (inf when failed)
  genetic breeder_;
};

void register_hybrid();

}  // namespace kf::strategies
