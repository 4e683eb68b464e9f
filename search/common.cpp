#include "kforge/strategies/common.hpp"

#include <algorithm>
#include <limits>

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
  if (space.cartesian_size() > 1e9) return std::nullopt;
  const auto& vs = space.valid();
  if (vs.empty()) return std::nullopt;
  const std::size_t start = r.index(vs.size());
  for (std::size_t k = 0; k < vs.size(); ++k) {
    auto c = vs.at((start + k) % vs.size());
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

double fitness(const trial& t) noexcept {
  return t.ok() ? t.time_ms : std::numeric_limits<double>::infinity();
}

}  // namespace kf::strategies
