// Strategy "brute_force": every valid configuration once, in the space's lexicographic order (for
// recording spaces). Options: none.
#pragma once

#include "kforge/strategy.hpp"

namespace kf::strategies {

class brute_force {
 public:
  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state&, std::span<const trial>) {}
  bool finished(const search_state& s) const;

 private:
  std::size_t next_ = 0;
  std::size_t total_ = 0;
};

void register_brute_force();

}  // namespace kf::strategies
