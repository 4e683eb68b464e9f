// The built-in operators' registration functions (each defined in its own file in transforms/).
#pragma once

#include <vector>

namespace kf::transforms {

using register_fn = void (*)();
/// Every built-in operator's registration function, in a fixed order.
std::vector<register_fn> builtin_operators();

}  // namespace kf::transforms
