#include "kforge/strategies/genetic.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kforge/strategies/common.hpp"

namespace kf::strategies {

void genetic::set_transfer(std::shared_ptr<const transfer_data> t) {
  prior_ = t ? transfer_prior(*t) : transfer_prior();
}

void genetic::initialize(const search_space&, std::uint64_t seed) {
  rng_.reseed(seed);
  from_prior_ = 0;
  population_.clear();
  offspring_.clear();
  awaiting_.clear();
  exhausted_ = false;
}

const genetic::member& genetic::select_parent() {
  // Rank-weighted: population_ is sorted best first; weight (N - r)^pressure.
  const std::size_t n = population_.size();
  double total = 0;
  for (std::size_t r = 0; r < n; ++r)
    total += std::pow(static_cast<double>(n - r), opt_.selection_pressure);
  double u = rng_.uniform() * total;
  for (std::size_t r = 0; r < n; ++r) {
    u -= std::pow(static_cast<double>(n - r), opt_.selection_pressure);
    if (u <= 0) return population_[r];
  }
  return population_.back();
}

namespace {
void mutate(const search_space& space, config& c, const genetic_options& opt, rng& r) {
  const auto params = space.params();
  for (std::size_t i = 0; i < c.size(); ++i) {
    const auto n = static_cast<std::uint32_t>(params[i].values.size());
    if (n < 2 || !r.bernoulli(opt.mutation_rate)) continue;
    if (params[i].ordered && r.bernoulli(opt.adjacent_mutation)) {
      if (c[i] == 0) c[i] = 1;
      else if (c[i] + 1 == n) c[i] = n - 2;
      else c[i] += r.bernoulli(0.5) ? 1 : -1;
    } else {
      auto v = static_cast<std::uint32_t>(r.index(n - 1));
      c[i] = v >= c[i] ? v + 1 : v;
    }
  }
}
}  // namespace

bool repair_config(const search_space& space, config& c, rng& r) {
  if (space.is_valid(c)) return true;
  std::vector<std::size_t> genes(c.size());
  std::iota(genes.begin(), genes.end(), 0);
  r.shuffle(std::span<std::size_t>(genes));
  std::vector<std::uint32_t> fixes;
  for (auto i : genes) {
    const auto orig = c[i];
    fixes.clear();
    const auto n = static_cast<std::uint32_t>(space.params()[i].values.size());
    for (std::uint32_t v = 0; v < n; ++v) {
      if (v == orig) continue;
      c[i] = v;
      if (space.is_valid(c)) fixes.push_back(v);
    }
    if (!fixes.empty()) {
      c[i] = fixes[r.index(fixes.size())];
      return true;
    }
    c[i] = orig;
  }
  return false;
}

config breed_child(const search_space& space, const config& a, const config& b, const genetic_options& opt, rng& r) {
  config c = a;
  const std::size_t d = c.size();
  if (opt.crossover == "uniform") {
    for (std::size_t i = 0; i < d; ++i)
      if (r.bernoulli(0.5)) c[i] = b[i];
  } else if (opt.crossover == "single_point") {
    const auto p = d > 1 ? 1 + r.index(d - 1) : 0;
    for (std::size_t i = p; i < d; ++i) c[i] = b[i];
  } else {  // two_point
    auto p = r.index(d + 1), q = r.index(d + 1);
    if (p > q) std::swap(p, q);
    for (std::size_t i = p; i < q; ++i) c[i] = b[i];
  }
  mutate(space, c, opt, r);
  if (c == a || c == b) {
    // A copy of a parent teaches nothing: move one gene.
    std::vector<std::size_t> movable;
    for (std::size_t i = 0; i < d; ++i)
      if (space.params()[i].values.size() > 1) movable.push_back(i);
    if (!movable.empty()) {
      const auto i = movable[r.index(movable.size())];
      const auto n = static_cast<std::uint32_t>(space.params()[i].values.size());
      if (space.params()[i].ordered && r.bernoulli(opt.adjacent_mutation)) {
        c[i] = c[i] == 0 ? 1 : (c[i] + 1 == n ? n - 2 : (r.bernoulli(0.5) ? c[i] + 1 : c[i] - 1));
      } else {
        auto v = static_cast<std::uint32_t>(r.index(n - 1));
        c[i] = v >= c[i] ? v + 1 : v;
      }
    }
  }
  return c;
}

std::optional<config> genetic::best_neighbour(const search_state& s, const std::vector<config>& taken) {
  // The best individual whose one-gene neighbourhood still has unmeasured valid configurations.
  for (const auto& m : population_) {
    auto ns = s.space().neighbours(m.cfg, neighbourhood::hamming);
    std::erase_if(ns, [&](const config& c) {
      return s.seen(c) || std::find(taken.begin(), taken.end(), c) != taken.end();
    });
    if (!ns.empty()) return ns[rng_.index(ns.size())];
    if (!std::isfinite(m.fit)) break;
  }
  return std::nullopt;
}

std::vector<config> genetic::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  auto add_random = [&]() {
    auto c = draw_unseen(s, rng_, out);
    if (!c) {
      exhausted_ = true;
      return false;
    }
    out.push_back(std::move(*c));
    return true;
  };
  // Initial population: uniform valid draws.
  if (population_.empty()) {
    const std::size_t want = opt_.population_size > offspring_.size() + awaiting_.size()
                                 ? opt_.population_size - offspring_.size() - awaiting_.size()
                                 : 0;
    while (out.size() < std::min(n, want) && from_prior_ < opt_.transfer_initial) {
      auto c = best_unseen_by_prior(s, prior_, out);
      if (!c) break;
      out.push_back(std::move(*c));
      ++from_prior_;
    }
    while (out.size() < std::min(n, want))
      if (!add_random()) break;
    awaiting_.insert(out.begin(), out.end());
    return out;
  }
  std::size_t attempts = 0;
  while (out.size() < n && attempts < 50 * n + 100) {
    ++attempts;
    if (opt_.local_search > 0 && rng_.bernoulli(opt_.local_search)) {
      if (auto c = best_neighbour(s, out)) {
        out.push_back(std::move(*c));
        continue;
      }
    }
    if (opt_.immigrants > 0 && rng_.bernoulli(opt_.immigrants)) {
      if (!add_random()) break;
      continue;
    }
    const config& a = select_parent().cfg;
    const config& b = select_parent().cfg;
    config c = breed_child(s.space(), a, b, opt_, rng_);
    if (!repair_config(s.space(), c, rng_)) {
      auto r = draw_unseen(s, rng_, out);
      if (!r) {
        exhausted_ = true;
        break;
      }
      c = std::move(*r);
    }
    if (std::find(out.begin(), out.end(), c) != out.end()) continue;
    if (const trial* t = s.history().find(c)) {
      // Already measured: a free member of the offspring.
      if (std::none_of(offspring_.begin(), offspring_.end(), [&](const member& m) { return m.cfg == c; }) &&
          std::none_of(population_.begin(), population_.end(), [&](const member& m) { return m.cfg == c; })) {
        offspring_.push_back({c, fitness(*t)});
        if (offspring_.size() >= generation_size() && awaiting_.empty()) next_generation();
      }
      continue;
    }
    if (s.seen(c)) continue;  // pending
    out.push_back(std::move(c));
  }
  while (out.size() < n && attempts >= 50 * n + 100)  // stuck: fill with fresh random configurations
    if (!add_random()) break;
  awaiting_.insert(out.begin(), out.end());
  return out;
}

void genetic::observe(const search_state&, std::span<const trial> done) {
  for (const auto& t : done) {
    offspring_.push_back({t.cfg, fitness(t)});
    awaiting_.erase(t.cfg);  // a run's start configuration is none of its own
  }
  if (population_.empty()) {
    // The initial population forms once it is complete (or the space ran out of configurations).
    if (awaiting_.empty() && !offspring_.empty() &&
        (offspring_.size() >= opt_.population_size || exhausted_)) {
      population_ = std::move(offspring_);
      offspring_.clear();
      std::stable_sort(population_.begin(), population_.end(),
                       [](const member& x, const member& y) { return x.fit < y.fit; });
    }
    return;
  }
  if (offspring_.size() >= generation_size() && awaiting_.empty()) next_generation();
}

void genetic::next_generation() {
  auto by_fit = [](const member& x, const member& y) { return x.fit < y.fit; };
  std::stable_sort(offspring_.begin(), offspring_.end(), by_fit);
  std::vector<member> next;
  if (opt_.replacement == "plus") {
    next = population_;
    next.insert(next.end(), offspring_.begin(), offspring_.end());
    std::stable_sort(next.begin(), next.end(), by_fit);
  } else {
    const auto keep = std::min(opt_.elites, population_.size());
    next.assign(population_.begin(), population_.begin() + static_cast<long>(keep));
    next.insert(next.end(), offspring_.begin(), offspring_.end());
    std::stable_sort(next.begin(), next.end(), by_fit);
  }
  if (next.size() > opt_.population_size) next.resize(opt_.population_size);
  population_ = std::move(next);
  offspring_.clear();
}

bool genetic::finished(const search_state&) const {
  return exhausted_;
}

void register_genetic() {
  strategy_registry().add({
      "ga",
      "constraint-aware genetic algorithm: rank selection, crossover, mutation, repair, elitism",
      {
          int_option("population_size", 10, "individuals in the population", 2, 100000),
          string_option("crossover", "uniform", "crossover operator",
                        {"uniform", "single_point", "two_point"}),
          real_option("mutation_rate", 0.15, "probability that a gene mutates", 0, 1),
          real_option("adjacent_mutation", 0.5, "probability that an ordered gene moves one step", 0, 1),
          int_option("elites", 2, "individuals kept unchanged (generational replacement)", 0, 100000),
          string_option(
              "replacement", "plus",
              "next generation from the offspring and elites (generational) or the best of both (plus)",
              {"generational", "plus"}),
          real_option("selection_pressure", 1.5, "exponent of the rank weights", 0, 10),
          real_option("immigrants", 0.0, "fraction of children drawn uniformly from the valid set", 0, 1),
          int_option("generation_size", 1,
                     "children bred before the population is updated (0: population_size)", 0, 100000),
          real_option("local_search", 0.0,
                      "fraction of children that are unmeasured one-gene neighbours of the best", 0, 1),
          int_option("transfer_initial", 5,
                     "with transfer: initial members taken from the records' best", 0, 100000),
      },
      [](const options& o) {
        genetic_options g;
        g.population_size = static_cast<std::size_t>(o.integer("population_size"));
        g.crossover = o.string("crossover");
        g.mutation_rate = o.real("mutation_rate");
        g.adjacent_mutation = o.real("adjacent_mutation");
        g.elites = static_cast<std::size_t>(o.integer("elites"));
        g.replacement = o.string("replacement");
        g.selection_pressure = o.real("selection_pressure");
        g.immigrants = o.real("immigrants");
        g.generation_size = static_cast<std::size_t>(o.integer("generation_size"));
        g.local_search = o.real("local_search");
        g.transfer_initial = static_cast<std::size_t>(o.integer("transfer_initial"));
        if (g.elites > g.population_size) o.fail("elites", "must not exceed population_size");
        return strategy(genetic(g), "ga");
      },
  });
}

}  // namespace kf::strategies
