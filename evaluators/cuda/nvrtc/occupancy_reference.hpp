// CUDA's own occupancy calculator (the header-only cuda_occupancy.h), wrapped so that tests can check
// kf::theoretical_occupancy against it without seeing a CUDA header. Not for production paths.
#pragma once

#include "kforge/evaluators/compile.hpp"

namespace kf::cuda::detail {

/// Bits of cudaOccResult::limitingFactors.
inline constexpr unsigned occ_limit_warps = 0x01, occ_limit_registers = 0x02, occ_limit_shared_memory = 0x04,
                          occ_limit_blocks = 0x08, occ_limit_barriers = 0x10;

struct reference_occupancy {
  bool ok = false;  ///< cudaOccMaxActiveBlocksPerMultiprocessor returned CUDA_OCC_SUCCESS
  int blocks_per_sm = 0;
  unsigned limiting_factors = 0;
};

/// cudaOccMaxActiveBlocksPerMultiprocessor for a kernel with `m`'s registers, static shared memory and
/// barriers, opted in to the device's maximum dynamic shared memory, with the default cache/carveout
/// state. It ignores the kernel's __launch_bounds__ (as cuda_occupancy.h does).
reference_occupancy cuda_occupancy_reference(const static_metrics& m, int block_threads, int dynamic_shared,
                                             const device_limits& d = {});

}  // namespace kf::cuda::detail
