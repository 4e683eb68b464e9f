#include "kforge/strategy.hpp"

#include <algorithm>

namespace kf {

bool search_state::seen(const config& c) const {
  if (history_->measured(c)) return true;
  return std::find(pending_.begin(), pending_.end(), c) != pending_.end();
}

registry<strategy>& strategy_registry() {
  static registry<strategy> r("strategy");
  return r;
}

}  // namespace kf
