// Planted tensor-map faults (tests/gpu: gpu.planted_tensor_map_faults_come_back_as_failing_trials): a 2D
// copy y = x of a rows x cols f32 matrix through TMA, one 32 x 32 tile per block, each value of PLANT a way
// of getting a tensor map or its mbarrier wrong that must end as a failing trial, never a hung run. 0 is
// correct. (See tma.yaml for the statuses expected.)
//   1 the description's dims cover half the rows: the TMA zero-fills the rest (wrong_result)
//   2 the mbarrier expects 16 bytes more than the copy brings: its phase never completes (timeout)
//   3 the description makes no map (`when` false): the copy goes through 128 zero bytes (a fault, or a
//     phase that never completes: crashed, launch_failed or timeout)
//   4 the copy's innermost coordinate is one element off, so the box starts 4 bytes past a 16-byte boundary
//     (crashed: the H200 raised CUDA_ERROR_ILLEGAL_INSTRUCTION on 2026-12-04, not the zero-filled or shifted
//     copy that was expected; either way a failing trial)
//   5 the description's box is 512 rows, over the driver's 256 (invalid: refused before any GPU)
// The TMA instructions exist from sm_90 on (no architecture-specific target needed).
#ifndef PLANT
#define PLANT 0
#endif

#define TILE 32  // box: 32 f32 (128 bytes) x 32 rows, no swizzle: the tile lands row-major in shared memory

struct __align__(64) planted_tensor_map {
  unsigned long long opaque[16];
};

extern "C" __global__ void planted_tma(int rows, int cols, const float* x, float* y,
                                       const __grid_constant__ planted_tensor_map tmX) {
  __shared__ __align__(128) float tile[TILE][TILE];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned tile_addr = (unsigned)__cvta_generic_to_shared(&tile[0][0]);
  const unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
#if PLANT == 2
  const unsigned bytes = TILE * TILE * 4 + 16;
#else
  const unsigned bytes = TILE * TILE * 4;
#endif
#if PLANT == 4
  const int copy_c0 = c0 + 1;
#else
  const int copy_c0 = c0;
#endif
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_addr) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_addr), "r"(bytes) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            tile_addr),
        "l"(&tmX), "r"(copy_c0), "r"(r0), "r"(bar_addr)
        : "memory");
  }
  // Phase 0 of the barrier: the arrival and the copy's bytes.
  asm volatile(
      "{\n.reg .pred done;\nPLANTED_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@done bra PLANTED_DONE;\nbra PLANTED_WAIT;\nPLANTED_DONE:\n}\n" ::"r"(bar_addr)
      : "memory");
  for (int e = threadIdx.x; e < TILE * TILE; e += blockDim.x) {
    const int r = r0 + e / TILE, c = c0 + e % TILE;
    if (r < rows && c < cols) y[(long long)r * cols + c] = tile[e / TILE][e % TILE];
  }
}

// The reference: the same copy without TMA.
extern "C" __global__ void planted_tma_reference(int rows, int cols, const float* x, float* y,
                                                 const __grid_constant__ planted_tensor_map) {
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
  for (int e = threadIdx.x; e < TILE * TILE; e += blockDim.x) {
    const int r = r0 + e / TILE, c = c0 + e % TILE;
    if (r < rows && c < cols) y[(long long)r * cols + c] = x[(long long)r * cols + c];
  }
}
