#include "transforms/operators.hpp"

namespace kf::transforms {

std::vector<register_fn> builtin_operators() { return {}; }

}  // namespace kf::transforms
