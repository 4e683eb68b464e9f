#include "kforge/strategies/hybrid.hpp"

#include <algorithm>
#include <cmath>

#include "kforge/strategies/common.hpp"

namespace kf::strategies {

void hybrid::initialize(const search_space& space, std::uint64_t seed) {
  rng_.reseed(seed);
  bayesian_options bo;
  bo.initial_samples = opt_.initial_samples;
  bo.refit_every = opt_.refit_every;
  bo.max_points = opt_.max_points;
  model_ = std::make_unique<bayesian>(bo);
  model_->initialize(space, rng_());
  population_.clear();
}

void hybrid::observe(const search_state& s, std::span<const trial> done) {
  model_->observe(s, done);
  for (const auto& t : done) {
    population_.emplace_back(t.cfg, fitness(t));
    std::stable_sort(population_.begin(), population_.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
    if (population_.size() > opt_.population_size) population_.resize(opt_.population_size);
  }
}

std::vector<config> hybrid::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  const auto& space = s.space();
  auto fresh = [&](const config& c) {
    return !s.seen(c) && std::find(out.begin(), out.end(), c) == out.end();
  };
  while (out.size() < n && s.history().size() + out.size() < opt_.initial_samples) {
    auto c = draw_unseen(s, rng_, out);
    if (!c) return out;
    out.push_back(std::move(*c));
  }
  if (out.size() == n) return out;
  model_->update_model();
  genetic_options go;
  go.mutation_rate = opt_.mutation_rate;
  // Rank-weighted parents (weight (P - r)^1.5), as in "ga".
  auto parent = [&]() -> const config& {
    const std::size_t p = population_.size();
    double total = 0;
    for (std::size_t r = 0; r < p; ++r)
      total += std::pow(static_cast<double>(p - r), 1.5);
    double u = rng_.uniform() * total;
    for (std::size_t r = 0; r < p; ++r) {
      u -= std::pow(static_cast<double>(p - r), 1.5);
      if (u <= 0) return population_[r].first;
    }
    return population_.back().first;
  };
  while (out.size() < n) {
    std::vector<config> kids;
    if (!population_.empty()) {
      for (const auto& nb : space.neighbours(population_.front().first, neighbourhood::hamming))
        if (fresh(nb)) kids.push_back(nb);
      for (std::size_t k = 0; k < 4 * opt_.offspring && kids.size() < opt_.offspring + 32; ++k) {
        const config& a = parent();
        const config& b = parent();
        config c = breed_child(space, a, b, go, rng_);
        if (!repair_config(space, c, rng_)) continue;
        if (fresh(c) && std::find(kids.begin(), kids.end(), c) == kids.end()) kids.push_back(std::move(c));
      }
      for (std::size_t k = 0; k < opt_.immigrants; ++k) {
        auto c = draw_unseen(s, rng_, out);
        if (!c) break;
        if (std::find(kids.begin(), kids.end(), *c) == kids.end()) kids.push_back(std::move(*c));
      }
    }
    if (kids.empty()) {
      auto c = draw_unseen(s, rng_, out);
      if (!c) break;
      out.push_back(std::move(*c));
      continue;
    }
    if (rng_.bernoulli(opt_.epsilon) || !model_->model()) {
      out.push_back(kids[rng_.index(kids.size())]);
      continue;
    }
    Eigen::MatrixXd X(static_cast<Eigen::Index>(kids.size()),
                      static_cast<Eigen::Index>(space.encoded_dimension()));
    for (std::size_t i = 0; i < kids.size(); ++i)
      X.row(static_cast<Eigen::Index>(i)) = model_->encode(kids[i]).transpose();
    acquisition::spec spec;
    const auto sel = acquisition::select(*model_->model(), X, spec, 1, &rng_);
    out.push_back(kids[sel.top.empty() ? 0 : sel.top.front().index]);
  }
  return out;
}

void register_hybrid() {
  strategy_registry().add({
      "hybrid",
      "steady-state evolutionary search whose offspring are screened by a Gaussian process (log-EI), "
      "epsilon-greedy",
      {
          int_option("population_size", 10, "individuals kept", 2, 100000),
          int_option("offspring", 64, "children bred and screened per proposal", 1, 100000),
          int_option("immigrants", 8, "uniformly drawn unvisited configurations screened with the children",
                     0, 100000),
          real_option("epsilon", 0.1, "probability of evaluating a random child instead of the GP's choice",
                      0, 1),
          int_option("initial_samples", 10, "uniform draws before the model is used", 1, 100000),
          int_option("refit_every", 8, "observations between hyperparameter fits", 1, 100000),
          int_option("max_points", 400, "GP training points at most", 10, 100000),
          real_option("mutation_rate", 0.2, "probability that a gene mutates", 0, 1),
      },
      [](const options& o) {
        hybrid_options h;
        h.population_size = static_cast<std::size_t>(o.integer("population_size"));
        h.offspring = static_cast<std::size_t>(o.integer("offspring"));
        h.immigrants = static_cast<std::size_t>(o.integer("immigrants"));
        h.epsilon = o.real("epsilon");
        h.initial_samples = static_cast<std::size_t>(o.integer("initial_samples"));
        h.refit_every = static_cast<std::size_t>(o.integer("refit_every"));
        h.max_points = static_cast<std::size_t>(o.integer("max_points"));
        h.mutation_rate = o.real("mutation_rate");
        return strategy(hybrid(h), "hybrid");
      },
  });
}

}  // namespace kf::strategies
