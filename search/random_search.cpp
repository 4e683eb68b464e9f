#include "kforge/strategies/random_search.hpp"

#include "kforge/strategies/common.hpp"

namespace kf::strategies {

void random_search::initialize(const search_space& space, std::uint64_t seed) {
  rng_.reseed(seed);
  swapped_.clear();
  next_ = 0;
  // A permutation of the valid set where it can be had (draws without replacement); otherwise, a space
  // too large to enumerate, uniform draws that skip what was seen.
  const auto* valid = space.valid_if_enumerable();
  permuted_ = valid != nullptr;
  total_ = permuted_ ? valid->size() : 0;
}

std::vector<config> random_search::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  if (!permuted_) {
    while (out.size() < n) {
      auto c = draw_unseen(s, rng_, out);
      if (!c) break;
      out.push_back(std::move(*c));
    }
    return out;
  }
  const auto& vs = s.space().valid();
  auto slot = [&](std::uint64_t i) {
    auto it = swapped_.find(i);
    return it == swapped_.end() ? i : it->second;
  };
  while (out.size() < n && next_ < total_) {
    // Sparse Fisher-Yates: swap position next_ with a uniform position in [next_, total_).
    const std::uint64_t j = next_ + rng_.index(total_ - next_);
    const std::uint64_t pick = slot(j);
    swapped_[j] = slot(next_);
    swapped_.erase(next_);
    ++next_;
    auto c = vs.at(pick);
    if (!s.seen(c)) out.push_back(std::move(c));
  }
  return out;
}

bool random_search::finished(const search_state&) const {
  return permuted_ && next_ >= total_;
}

void register_random_search() {
  strategy_registry().add({"random",
                           "uniform random search without replacement over the valid configurations",
                           {},
                           [](const options&) { return strategy(random_search{}, "random"); }});
}

}  // namespace kf::strategies
