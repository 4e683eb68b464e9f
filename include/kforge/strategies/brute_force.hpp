// Strategy "brute_force": every valid configuration once, in the space's lexicographic order (for
// recording spaces). On a space whose enumeration is refused (more valid configurations than
// search_space::max_valid_configs()) it walks the cartesian product in the same order, skipping what the
// constraints reject, without storing it. Options: none.
#pragma once

#include <cstdint>
#include <optional>

#include "kforge/strategy.hpp"

namespace kf::strategies {

class brute_force {
 public:
  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state&, std::span<const trial>) {}
  bool finished(const search_state& s) const;

 private:
  std::uint64_t next_ = 0;         // position in the valid set, or the rank in the cartesian product (walk_)
  std::uint64_t total_ = 0;        // the valid set's size, or the cartesian size (walk_)
  std::optional<valid_set> walk_;  // set when the space is too large to enumerate: every combination
};

void register_brute_force();

}  // namespace kf::strategies
