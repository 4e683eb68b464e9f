// Registration of the built-in transformation operators (one file per operator in this folder).
#include "kforge/transform.hpp"
#include "transforms/operators.hpp"

namespace kf {

void register_builtin_transforms() {
  for (auto* reg : transforms::builtin_operators()) reg();
}

}  // namespace kf
