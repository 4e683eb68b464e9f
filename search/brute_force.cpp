#include "kforge/strategies/brute_force.hpp"

namespace kf::strategies {

void brute_force::initialize(const search_space& space, std::uint64_t) {
  next_ = 0;
  total_ = space.valid().size();
}

std::vector<config> brute_force::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  const auto& vs = s.space().valid();
  while (out.size() < n && next_ < total_) {
    auto c = vs.at(next_++);
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
