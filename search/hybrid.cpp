#include "kforge/strategies/hybrid.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kforge/strategies/common.hpp"

namespace kf::strategies {

void hybrid::initialize(const search_space& space, std::uint64_t seed) {
  rng_.reseed(seed);
  bayesian_options bo;
  bo.initial_samples = opt_.initial_samples;
  bo.refit_every = opt_.refit_every;
  bo.max_points = opt_.max_points;
  bo.alignment_features = opt_.alignment_features;
  bo.transfer_initial = 0;  // hybrid draws its own initial design
  bo.transfer_mean = opt_.transfer_mean;
  bo.transfer_weight = opt_.transfer_weight;
  bo.transfer_strength = opt_.transfer_strength;
  model_ = std::make_unique<bayesian>(bo);
  model_->set_transfer(transfer_);
  model_->initialize(space, rng_());
  population_.clear();
  bandit_ = operator_bandit(space, opt_.bandit_prior);
  bottleneck_of_.clear();
  origin_.clear();
  strata_.clear();
  rotation_.clear();
  rotation_next_ = 0;
  if (opt_.alternatives == "stratified") strata_ = find_alternatives(space);
  for (std::size_t a = 0; a < strata_.size(); ++a)
    for (std::size_t k = 0; k < strata_[a].members.size(); ++k)
      rotation_.emplace_back(a, k);
  rng_.shuffle(std::span(rotation_));
}

std::optional<config> hybrid::draw_fresh(const search_state& s, const std::vector<config>& taken) {
  // Round robin over the strata; an exhausted stratum passes its turn to the next one.
  for (std::size_t tries = 0; tries < rotation_.size(); ++tries) {
    const auto [a, k] = rotation_[rotation_next_++ % rotation_.size()];
    if (auto c = draw_unseen_in(s, strata_[a], k, rng_, taken)) return c;
  }
  return draw_unseen(s, rng_, taken);
}

void hybrid::observe(const search_state& s, std::span<const trial> done) {
  model_->observe(s, done);
  for (const auto& t : done) {
    if (opt_.operators == "bandit") {
      bottleneck_of_[t.cfg] = classify_bottleneck(t);
      if (const auto it = origin_.find(t.cfg); it != origin_.end()) {
        bandit_.reward(it->second.context, it->second.family, fitness(t) < it->second.parent_fitness);
        origin_.erase(it);
      }
    }
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
  while (out.size() < n &&
         s.history().size() + out.size() < std::min(opt_.transfer_initial, opt_.initial_samples)) {
    auto c = best_unseen_by_prior(s, model_->prior(), out);
    if (!c) break;
    out.push_back(std::move(*c));
  }
  // Uniform draws: the initial design, and past it until a configuration has run correctly. Before that
  // the population holds failures only and the model has no time to fit: children of failures inherit
  // what made them fail (TritonBench-G's attention_score replayed, 4 correct of 73 measured
  // configurations: between evaluations 10 and 20, 2 of 21 seeds still without one found it that way,
  // uniform draws 11 of 18; scripts/tritonbench-g-replay).
  const bool none_ran = !s.history().best();
  while (out.size() < n && (none_ran || s.history().size() + out.size() < opt_.initial_samples)) {
    auto c = draw_fresh(s, out);
    if (!c) return out;
    out.push_back(std::move(*c));
  }
  if (out.size() == n || none_ran) return out;
  model_->update_model();
  genetic_options go;
  go.mutation_rate = opt_.mutation_rate;
  // Rank-weighted parents (weight (P - r)^1.5), as in "ga".
  auto parent_index = [&]() -> std::size_t {
    const std::size_t p = population_.size();
    double total = 0;
    for (std::size_t r = 0; r < p; ++r)
      total += std::pow(static_cast<double>(p - r), 1.5);
    double u = rng_.uniform() * total;
    for (std::size_t r = 0; r < p; ++r) {
      u -= std::pow(static_cast<double>(p - r), 1.5);
      if (u <= 0) return r;
    }
    return p - 1;
  };
  auto parent = [&]() -> const config& { return population_[parent_index()].first; };
  const bool bandit = opt_.operators == "bandit";
  // A child of one parent with the genes of one family mutated, the family chosen by the bandit from
  // the parent's bottleneck; nullopt when no family can mutate.
  auto family_child = [&]() -> std::optional<std::pair<config, origin>> {
    const auto& [pcfg, pfit] = population_[parent_index()];
    const auto it = bottleneck_of_.find(pcfg);
    const bottleneck b = it == bottleneck_of_.end() ? bottleneck::unknown : it->second;
    const auto f = bandit_.choose(b, rng_);
    if (!f) return std::nullopt;
    config c = bandit_.mutate(space, pcfg, *f, rng_);
    if (c == pcfg) return std::nullopt;
    return std::make_pair(std::move(c), origin{b, *f, pfit});
  };
  while (out.size() < n) {
    std::vector<config> kids;
    std::map<config, origin> kid_origin;  // the family-mutation children of this round
    if (!population_.empty()) {
      for (const auto& nb : space.neighbours(population_.front().first, neighbourhood::hamming))
        if (fresh(nb)) kids.push_back(nb);
      for (std::size_t k = 0; k < 4 * opt_.offspring && kids.size() < opt_.offspring + 32; ++k) {
        if (bandit && rng_.bernoulli(opt_.bandit_share)) {
          if (auto fc = family_child(); fc && fresh(fc->first)) {
            if (std::find(kids.begin(), kids.end(), fc->first) == kids.end()) {
              kid_origin.emplace(fc->first, fc->second);
              kids.push_back(std::move(fc->first));
            }
            continue;
          }
        }
        const config& a = parent();
        const config& b = parent();
        config c = breed_child(space, a, b, go, rng_);
        if (!repair_config(space, c, rng_)) continue;
        if (fresh(c) && std::find(kids.begin(), kids.end(), c) == kids.end()) kids.push_back(std::move(c));
      }
      const auto from_prior = prior_immigrants(s, out, std::min(opt_.transfer_immigrants, opt_.immigrants));
      for (const auto& c : from_prior)
        if (std::find(kids.begin(), kids.end(), c) == kids.end()) kids.push_back(c);
      for (std::size_t k = from_prior.size(); k < opt_.immigrants; ++k) {
        auto c = draw_fresh(s, out);
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
    // The pick; a family-mutation child remembers where it came from, for the bandit's reward.
    const auto take = [&](const config& c) {
      if (const auto it = kid_origin.find(c); it != kid_origin.end()) origin_[c] = it->second;
      out.push_back(c);
    };
    if (rng_.bernoulli(opt_.epsilon) || !model_->model()) {
      take(kids[rng_.index(kids.size())]);
      continue;
    }
    Eigen::MatrixXd X(static_cast<Eigen::Index>(kids.size()),
                      static_cast<Eigen::Index>(model_->input_dimension()));
    for (std::size_t i = 0; i < kids.size(); ++i)
      X.row(static_cast<Eigen::Index>(i)) = model_->encode(kids[i]).transpose();
    acquisition::spec spec;
    if (model_->has_prior_mean()) {
      // The GP models log(time) minus the prior mean (the records' prior): add it back.
      const double best = model_->best_log_time();
      if (std::isfinite(best)) {
        spec.mean_offset = model_->prior_means(kids, X);
        spec.best = best;
      }
    }
    const auto sel = acquisition::select(*model_->model(), X, spec, 1, &rng_);
    take(kids[sel.top.empty() ? 0 : sel.top.front().index]);
  }
  return out;
}

std::vector<config> hybrid::prior_immigrants(const search_state& s, const std::vector<config>& taken,
                                             std::size_t count) {
  std::vector<config> pool;
  if (count == 0) return pool;
  for (const auto& c : model_->prior().ranked()) {
    if (pool.size() >= opt_.transfer_pool) break;
    if (s.space().is_valid(c) && !s.seen(c) && std::find(taken.begin(), taken.end(), c) == taken.end())
      pool.push_back(c);
  }
  std::vector<config> out;
  for (std::size_t k = 0; k < count && !pool.empty(); ++k) {
    const auto i = rng_.index(pool.size());
    out.push_back(std::move(pool[i]));
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
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
          bool_option("alignment_features", true,
                      "the GP also sees, per integer parameter mixing powers of two with other values, "
                      "whether the value is a power of two"),
          int_option("transfer_initial", 3,
                     "with transfer: initial configurations taken from the records' best", 0, 100000),
          int_option("transfer_immigrants", 4,
                     "with transfer: immigrants drawn from the prior's best unvisited", 0, 100000),
          int_option("transfer_pool", 64,
                     "with transfer: how many of the prior's best unvisited they come from", 1, 100000),
          bool_option("transfer_mean", true, "with transfer: the records' prior as the GP's mean function"),
          real_option("transfer_weight", 0.5,
                      "with transfer: prior slope of the mean, as a fraction of the records' log-time spread",
                      -10, 10),
          real_option("transfer_strength", 4.0, "with transfer: pseudo-observations holding that slope", 0,
                      1e6),
          string_option("operators", "genetic",
                        "children by crossover and mutation (genetic), or also by bottleneck-guided family "
                        "mutations chosen by a bandit (bandit)",
                        {"genetic", "bandit"}),
          real_option("bandit_share", 0.5, "operators bandit: fraction of children made by family mutation",
                      0, 1),
          real_option("bandit_prior", 1.0,
                      "operators bandit: pseudo-successes of the expert-favoured families", 0, 100),
          string_option("alternatives", "stratified",
                        "initial design and immigrants: drawn stratum by stratum over a space's alternative "
                        "implementations (stratified) or uniformly over the valid set (uniform)",
                        {"stratified", "uniform"}),
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
        h.alignment_features = o.boolean("alignment_features");
        h.transfer_initial = static_cast<std::size_t>(o.integer("transfer_initial"));
        h.transfer_immigrants = static_cast<std::size_t>(o.integer("transfer_immigrants"));
        h.transfer_pool = static_cast<std::size_t>(o.integer("transfer_pool"));
        h.transfer_mean = o.boolean("transfer_mean");
        h.transfer_weight = o.real("transfer_weight");
        h.transfer_strength = o.real("transfer_strength");
        h.operators = o.string("operators");
        h.bandit_share = o.real("bandit_share");
        h.bandit_prior = o.real("bandit_prior");
        h.alternatives = o.string("alternatives");
        return strategy(hybrid(h), "hybrid");
      },
  });
}

}  // namespace kf::strategies
