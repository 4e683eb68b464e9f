#ifndef KF_CP_ASYNC_HELPERS
#define KF_CP_ASYNC_HELPERS
// cp.async helpers added by kforge's pipeline transform (sm_80 and newer).
template <class T>
__device__ __forceinline__ void kf_cp_async(T* dst, const T* src, bool pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const size_t s = __cvta_generic_to_global(src);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
               :: "r"(d), "l"(s), "n"(sizeof(T)), "r"(pred ? (int)sizeof(T) : 0) : "memory");
}
__device__ __forceinline__ void kf_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void kf_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
#endif
// C = A * B for n x n row-major matrices; TILE x TILE threads per block, one output each, K in tiles staged
// in shared memory (input of the pipeline tests).
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void matmul(int n, const float* A, const float* B, float* C) {
  __shared__ float As[3][TILE][TILE];
  __shared__ float Bs[3][TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  //@kf pipeline k_tiles buffers=As,Bs
  {
    for (int kf_k_tiles_s = 0; kf_k_tiles_s < 2; ++kf_k_tiles_s) {  // prologue: issue tiles 0..1
      const int kf_k_tiles_k = (0) + kf_k_tiles_s * 1;
      if (kf_k_tiles_k < (n + TILE - 1) / TILE) {
        const int kf_k_tiles_ls = kf_k_tiles_s;
        const int t = kf_k_tiles_k;
        { const bool kf_k_tiles_p = (row < n && t * TILE + tx < n); kf_cp_async(&As[kf_k_tiles_ls][ty][tx], kf_k_tiles_p ? &A[(size_t)row * n + t * TILE + tx] : A, kf_k_tiles_p); }
        { const bool kf_k_tiles_p = (t * TILE + ty < n && col < n); kf_cp_async(&Bs[kf_k_tiles_ls][ty][tx], kf_k_tiles_p ? &B[(size_t)(t * TILE + ty) * n + col] : B, kf_k_tiles_p); }
      }
      kf_cp_async_commit();
    }
    int kf_k_tiles_it = 0;
    for (int t = 0; t < (n + TILE - 1) / TILE; ++t) {
      {
        const int kf_k_tiles_k = t + 2 * 1;
        if (kf_k_tiles_k < (n + TILE - 1) / TILE) {
          const int kf_k_tiles_ls = (kf_k_tiles_it + 2) % 3;
          const int t = kf_k_tiles_k;
          { const bool kf_k_tiles_p = (row < n && t * TILE + tx < n); kf_cp_async(&As[kf_k_tiles_ls][ty][tx], kf_k_tiles_p ? &A[(size_t)row * n + t * TILE + tx] : A, kf_k_tiles_p); }
          { const bool kf_k_tiles_p = (t * TILE + ty < n && col < n); kf_cp_async(&Bs[kf_k_tiles_ls][ty][tx], kf_k_tiles_p ? &B[(size_t)(t * TILE + ty) * n + col] : B, kf_k_tiles_p); }
        }
        kf_cp_async_commit();
      }
      kf_cp_async_wait<2>();
      const int kf_k_tiles_cs = kf_k_tiles_it % 3;
      __syncthreads();
      //@kf unroll k_inner
      for (int k = 0; k < TILE; ++k) acc += As[kf_k_tiles_cs][ty][k] * Bs[kf_k_tiles_cs][k][tx];
      __syncthreads();
      ++kf_k_tiles_it;
    }
    kf_cp_async_wait<0>();
  }
  if (row < n && col < n) C[(size_t)row * n + col] = acc;
}
