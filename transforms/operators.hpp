// The built-in operators' registration functions (each defined in its own file in transforms/; the
// annotation syntax, options and supported forms are in docs/transforms.md).
#pragma once

#include <vector>

namespace kf::transforms {

using register_fn = void (*)();
/// Every built-in operator's registration function, in a fixed order.
std::vector<register_fn> builtin_operators();

void register_unroll();          // transforms/unroll.cpp
void register_vectorize();       // transforms/vectorize.cpp
void register_coarsen();         // transforms/coarsen.cpp
void register_smem_tile();       // transforms/smem_tile.cpp
void register_pipeline();        // transforms/pipeline.cpp
void register_read_only();       // transforms/read_only.cpp
void register_launch_bounds();   // transforms/launch_bounds.cpp
void register_register_cap();    // transforms/register_cap.cpp
void register_compiler_flags();  // transforms/compiler_flags.cpp
void register_tensor_core();     // transforms/tensor_core.cpp

}  // namespace kf::transforms
