#include "transforms/operators.hpp"

namespace kf::transforms {

std::vector<register_fn> builtin_operators() {
  return {register_unroll,         register_vectorize,  register_coarsen,       register_smem_tile,
          register_pipeline,       register_read_only,  register_launch_bounds, register_register_cap,
          register_compiler_flags, register_tensor_core};
}

}  // namespace kf::transforms
