#include "evaluators/cuda/nvrtc/occupancy_reference.hpp"

#include <cuda_occupancy.h>

namespace kf::cuda::detail {

static_assert(occ_limit_warps == OCC_LIMIT_WARPS && occ_limit_registers == OCC_LIMIT_REGISTERS &&
              occ_limit_shared_memory == OCC_LIMIT_SHARED_MEMORY && occ_limit_blocks == OCC_LIMIT_BLOCKS &&
              occ_limit_barriers == OCC_LIMIT_BARRIERS);

reference_occupancy cuda_occupancy_reference(const static_metrics& m, int block_threads, int dynamic_shared,
                                             const device_limits& d) {
  cudaOccDeviceProp prop;
  prop.computeMajor = d.cc_major;
  prop.computeMinor = d.cc_minor;
  prop.maxThreadsPerBlock = d.max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  prop.regsPerBlock = d.max_registers_per_block;
  prop.regsPerMultiprocessor = d.registers_per_sm;
  prop.warpSize = d.warp_size;
  prop.sharedMemPerBlock = 48 * 1024;
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(d.shared_per_sm);
  prop.numSms = d.sm_count;
  prop.sharedMemPerBlockOptin = static_cast<size_t>(d.shared_per_block_optin);
  prop.reservedSharedMemPerBlock = static_cast<size_t>(d.shared_reserved_per_block);

  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = m.max_threads_per_block > 0 ? m.max_threads_per_block : d.max_threads_per_block;
  attr.numRegs = m.registers;
  attr.sharedSizeBytes = static_cast<size_t>(m.shared_static_bytes);
  attr.partitionedGCConfig = PARTITIONED_GC_OFF;
  attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  attr.maxDynamicSharedSizeBytes = static_cast<size_t>(d.shared_per_block_optin - m.shared_static_bytes);
  attr.numBlockBarriers = m.barriers;

  cudaOccDeviceState state;
  cudaOccResult result{};
  reference_occupancy out;
  out.ok = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, block_threads,
                                                   static_cast<size_t>(dynamic_shared)) == CUDA_OCC_SUCCESS;
  out.blocks_per_sm = result.activeBlocksPerMultiprocessor;
  out.limiting_factors = result.limitingFactors;
  return out;
}

}  // namespace kf::cuda::detail
