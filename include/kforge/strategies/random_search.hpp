// Strategy "random": uniform random search without replacement over the valid configurations.
//
// On enumerable spaces it walks a lazily drawn random permutation of the valid set (each valid
// configuration exactly once, in O(1) per proposal); otherwise it draws by rejection and skips what was
// seen. Options: none.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kforge/random.hpp"
#include "kforge/strategy.hpp"

namespace kf::strategies {

class random_search {
 public:
  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state&, std::span<const trial>) {}
  bool finished(const search_state& s) const;

 private:
  rng rng_{0};
  bool permuted_ = false;
  std::size_t total_ = 0;  // size of the valid set when permuted
  std::size_t next_ = 0;   // positions [0, next_) of the permutation are drawn
  std::unordered_map<std::uint64_t, std::uint64_t> swapped_;  // sparse Fisher-Yates over [0, total_)
};

void register_random_search();

}  // namespace kf::strategies
