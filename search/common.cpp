#include "kforge/strategies/common.hpp"

#include <algorithm>
#include <limits>

#include "kforge/error.hpp"

namespace kf::strategies {

std::optional<config> draw_unseen(const search_state& s, rng& r, const std::vector<config>& also) {
  const auto& space = s.space();
  auto fresh = [&](const config& c) {
    return !s.seen(c) && std::find(also.begin(), also.end(), c) == also.end();
  };
  for (int attempt = 0; attempt < 64; ++attempt) {
    auto c = space.sample(r);
    if (fresh(c)) return c;
  }
  const auto* vs = space.valid_if_enumerable();
  if (vs == nullptr || vs->empty()) return std::nullopt;
  const std::size_t start = r.index(vs->size());
  for (std::size_t k = 0; k < vs->size(); ++k) {
    auto c = vs->at((start + k) % vs->size());
    if (fresh(c)) return c;
  }
  return std::nullopt;
}

std::optional<config> best_unseen_by_prior(const search_state& s, const transfer_prior& prior,
                                           const std::vector<config>& also) {
  for (const auto& c : prior.ranked())
    if (s.space().is_valid(c) && !s.seen(c) && std::find(also.begin(), also.end(), c) == also.end()) return c;
  return std::nullopt;
}

std::vector<alternative_strata> find_alternatives(const search_space& space, std::size_t max_valid) {
  std::vector<alternative_strata> out;
  const auto params = space.params();
  std::vector<std::size_t> candidates;
  for (std::size_t p = 0; p < params.size(); ++p)
    if (!params[p].ordered && params[p].values.size() >= 2) candidates.push_back(p);
  if (candidates.empty()) return out;
  const valid_set* vs = space.valid_if_enumerable(max_valid);
  if (vs == nullptr || vs->size() < 2) return out;  // too large to enumerate or to stratify, or too small
  const std::size_t d = params.size();
  // For each candidate p, value v and parameter q: which values q takes within the stratum p = v
  // (first value seen, and whether a second one was seen), and across the whole valid set.
  constexpr std::uint32_t none = ~std::uint32_t{0};
  struct seen_values {
    std::uint32_t first = none;
    bool several = false;
    void add(std::uint32_t v) {
      if (first == none)
        first = v;
      else if (v != first)
        several = true;
    }
  };
  std::vector<seen_values> overall(d);
  std::vector<std::vector<std::vector<seen_values>>> within(candidates.size());
  std::vector<alternative_strata> strata(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto k = params[candidates[i]].values.size();
    within[i].assign(k, std::vector<seen_values>(d));
    strata[i].param = candidates[i];
    strata[i].members.resize(k);
  }
  config c(d);
  for (std::size_t pos = 0; pos < vs->size(); ++pos) {
    vs->decode(vs->rank(pos), c);
    for (std::size_t q = 0; q < d; ++q)
      overall[q].add(c[q]);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const auto v = c[candidates[i]];
      strata[i].members[v].push_back(static_cast<std::uint32_t>(pos));
      for (std::size_t q = 0; q < d; ++q)
        within[i][v][q].add(c[q]);
    }
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto& a = strata[i];
    bool pins = false;
    std::size_t smallest = vs->size();
    std::size_t nonempty = 0;
    for (std::size_t v = 0; v < a.members.size(); ++v) {
      if (a.members[v].empty()) continue;
      ++nonempty;
      smallest = std::min(smallest, a.members[v].size());
      for (std::size_t q = 0; q < d; ++q)
        if (q != a.param && overall[q].several && !within[i][v][q].several) pins = true;
    }
    const bool starved =
        nonempty >= 2 &&
        4.0 * static_cast<double>(nonempty) * static_cast<double>(smallest) < static_cast<double>(vs->size());
    if (!pins || !starved) continue;
    alternative_strata kept;
    kept.param = a.param;
    for (std::size_t v = 0; v < a.members.size(); ++v) {
      if (a.members[v].empty()) continue;
      kept.values.push_back(static_cast<std::uint32_t>(v));
      kept.members.push_back(std::move(a.members[v]));
    }
    out.push_back(std::move(kept));
  }
  return out;
}

std::optional<config> draw_unseen_in(const search_state& s, const alternative_strata& a, std::size_t k,
                                     rng& r, const std::vector<config>& also) {
  const auto& members = a.members.at(k);
  if (members.empty()) return std::nullopt;
  const auto& vs = s.space().valid();
  auto fresh = [&](const config& c) {
    return !s.seen(c) && std::find(also.begin(), also.end(), c) == also.end();
  };
  for (int attempt = 0; attempt < 64; ++attempt) {
    auto c = vs.at(members[r.index(members.size())]);
    if (fresh(c)) return c;
  }
  const std::size_t start = r.index(members.size());
  for (std::size_t j = 0; j < members.size(); ++j) {
    auto c = vs.at(members[(start + j) % members.size()]);
    if (fresh(c)) return c;
  }
  return std::nullopt;
}

bool is_power_of_two(const value& v) noexcept {
  if (!v.is_int()) return false;
  const auto x = v.as_int();
  return x > 0 && (x & (x - 1)) == 0;
}

std::vector<std::size_t> power_of_two_params(const search_space& space) {
  std::vector<std::size_t> out;
  const auto params = space.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& vals = params[i].values;
    // Sizes only: positive integers (a method selector 0, 1, 2, 3 is not a size).
    if (vals.size() < 3 ||
        !std::all_of(vals.begin(), vals.end(), [](const value& v) { return v.is_int() && v.as_int() > 0; }))
      continue;
    const auto p2 =
        std::count_if(vals.begin(), vals.end(), [](const value& v) { return is_power_of_two(v); });
    if (p2 > 0 && static_cast<std::size_t>(p2) < vals.size()) out.push_back(i);
  }
  return out;
}

double fitness(const trial& t) noexcept {
  return t.ok() ? t.time_ms : std::numeric_limits<double>::infinity();
}

}  // namespace kf::strategies
