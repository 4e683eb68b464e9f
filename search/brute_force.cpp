#include "kforge/strategies/brute_force.hpp"

#include <string>

#include "kforge/error.hpp"

namespace kf::strategies {

void brute_force::initialize(const search_space& space, std::uint64_t) {
  next_ = 0;
  walk_.reset();
  try {  // the pruned enumeration: fast even for a sparse space of many combinations
    total_ = space.valid().size();
    return;
  } catch (const error&) {  // too many valid configurations to store: walk the product instead
  }
  if (space.cartesian_size() > 9.2e18)
    throw error("brute_force: the space has " + std::to_string(space.cartesian_size()) +
                " combinations, too many to walk");
  std::vector<std::uint32_t> radices;
  for (const auto& p : space.params())
    radices.push_back(static_cast<std::uint32_t>(p.values.size()));
  walk_ = valid_set::all(std::move(radices));
  total_ = walk_->size();
}

std::vector<config> brute_force::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  const auto& set = walk_ ? *walk_ : s.space().valid();
  while (out.size() < n && next_ < total_) {
    auto c = set.at(next_++);
    if (walk_ && !s.space().is_valid(c)) continue;
    if (!s.seen(c)) out.push_back(std::move(c));
  }
  return out;
}

bool brute_force::finished(const search_state&) const {
  return next_ >= total_;
}

void register_brute_force() {
  strategy_registry().add(
      {"brute_force",
       "every valid configuration once, in lexicographic order (deterministic; ignores the seed)",
       {},
       [](const options&) { return strategy(brute_force{}, "brute_force"); }});
}

}  // namespace kf::strategies
