#define block_size 128
#define use_shared 1
#define kv_tile 32
#line 1 "attention.cu"
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
// Attention forward for one head size d = 64: for each of `bh` independent (batch, head) slices,
//   O = softmax(scale * Q K^T + mask) V,  Q, K, V, O row-major [seq x 64] f32 (slice b at offset b*seq*64)
// with the causal mask (query i attends to keys j <= i) when `causal` is nonzero. `scale` is an argument
// (1/sqrt(64) in kernel.yaml).
//
// Baseline: one thread per query row. The thread keeps its (scaled) query and its output accumulator in
// registers and streams over the keys with an online softmax: for each key it computes the score, updates
// the running maximum m and the running sum l, rescales the accumulator by exp(old m - new m) and adds
// exp(score - m) * V[j]. K and V are read straight from global memory (every thread of a warp reads the
// same key: one broadcast load).
// Tuning parameters (macros; the defaults are the baseline):
//   block_size  threads (queries) per block
//   use_shared  1: the block stages kv_tile keys and values at a time in shared memory; each thread then
//               reads them from there
//   kv_tile     keys per staged tile (with use_shared)
// Transform sites (kernel.yaml): `pipeline kv_tiles`, the staged loop with cp.async copies of the next
// tile(s) issued while the current one is used (load part: guarded copies into Ks and Vs, a barrier, the
// compute part, a barrier); `unroll keys`, the loop over the keys (staged or not).
#ifndef block_size
#define block_size 64
#endif
#ifndef use_shared
#define use_shared 0
#endif
#ifndef kv_tile
#define kv_tile 32
#endif

#define NEG_INF __int_as_float(0xff800000u)  // -infinity (NVRTC has no math.h here)

#define HEAD_DIM 64

extern "C" __global__ void __launch_bounds__(block_size, 2) attention(int bh, int seq, int causal, float scale, const float* __restrict__ Q, const float* __restrict__ K,
                                     const float* __restrict__ V, float* __restrict__ O) {
  const int b = blockIdx.y;
  const int i = blockIdx.x * block_size + threadIdx.x;  // this thread's query
  // Threads past the last query compute for the last one without writing: they take part in the barriers.
  const int qi = i < seq ? i : seq - 1;
  const size_t slice = (size_t)b * seq * HEAD_DIM;
  const float* q = Q + slice + (size_t)qi * HEAD_DIM;
  float qs[HEAD_DIM], acc[HEAD_DIM];
#pragma unroll
  for (int c = 0; c < HEAD_DIM; ++c) {
    qs[c] = q[c] * scale;
    acc[c] = 0.0f;
  }
  float m = NEG_INF, l = 0.0f;
  const int kv_end = causal ? qi + 1 : seq;  // keys this query attends to: [0, kv_end)
#if use_shared
  __shared__ float Ks[3][kv_tile][HEAD_DIM], Vs[3][kv_tile][HEAD_DIM];
  // Keys any query of this block needs.
  const int block_last = min(seq, (int)(blockIdx.x * block_size + block_size)) - 1;
  const int block_end = causal ? block_last + 1 : seq;
  //@kf pipeline kv_tiles buffers=Ks,Vs
  {
    for (int kf_kv_tiles_s = 0; kf_kv_tiles_s < 2; ++kf_kv_tiles_s) {  // prologue: issue tiles 0..1
      const int kf_kv_tiles_k = (0) + kf_kv_tiles_s * (kv_tile);
      if (kf_kv_tiles_k < block_end) {
        const int kf_kv_tiles_ls = kf_kv_tiles_s;
        const int j0 = kf_kv_tiles_k;
        for (int e = threadIdx.x; e < kv_tile * HEAD_DIM; e += block_size) {
          const int r = e / HEAD_DIM, c = e % HEAD_DIM;
          { const bool kf_kv_tiles_p = (j0 + r < seq); kf_cp_async(&Ks[kf_kv_tiles_ls][r][c], kf_kv_tiles_p ? &K[slice + (size_t)(j0 + r) * HEAD_DIM + c] : K, kf_kv_tiles_p); }
          { const bool kf_kv_tiles_p = (j0 + r < seq); kf_cp_async(&Vs[kf_kv_tiles_ls][r][c], kf_kv_tiles_p ? &V[slice + (size_t)(j0 + r) * HEAD_DIM + c] : V, kf_kv_tiles_p); }
        }
      }
      kf_cp_async_commit();
    }
    int kf_kv_tiles_it = 0;
    for (int j0 = 0; j0 < block_end; j0 += kv_tile) {
      {
        const int kf_kv_tiles_k = j0 + 2 * (kv_tile);
        if (kf_kv_tiles_k < block_end) {
          const int kf_kv_tiles_ls = (kf_kv_tiles_it + 2) % 3;
          const int j0 = kf_kv_tiles_k;
          for (int e = threadIdx.x; e < kv_tile * HEAD_DIM; e += block_size) {
            const int r = e / HEAD_DIM, c = e % HEAD_DIM;
            { const bool kf_kv_tiles_p = (j0 + r < seq); kf_cp_async(&Ks[kf_kv_tiles_ls][r][c], kf_kv_tiles_p ? &K[slice + (size_t)(j0 + r) * HEAD_DIM + c] : K, kf_kv_tiles_p); }
            { const bool kf_kv_tiles_p = (j0 + r < seq); kf_cp_async(&Vs[kf_kv_tiles_ls][r][c], kf_kv_tiles_p ? &V[slice + (size_t)(j0 + r) * HEAD_DIM + c] : V, kf_kv_tiles_p); }
          }
        }
        kf_cp_async_commit();
      }
      kf_cp_async_wait<2>();
      const int kf_kv_tiles_cs = kf_kv_tiles_it % 3;
      __syncthreads();
      const int n = min(kv_tile, kv_end - j0);  // this query's keys in the tile (none when n <= 0)
      //@kf unroll keys
      #pragma unroll 4
      for (int jj = 0; jj < n; ++jj) {
        float s = 0.0f;
  #pragma unroll
        for (int c = 0; c < HEAD_DIM; ++c) s += qs[c] * Ks[kf_kv_tiles_cs][jj][c];
        const float m_new = fmaxf(m, s);
        const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
        const float p = expf(s - m_new);
        l = l * correction + p;
  #pragma unroll
        for (int c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * Vs[kf_kv_tiles_cs][jj][c];
        m = m_new;
      }
      __syncthreads();
      ++kf_kv_tiles_it;
    }
    kf_cp_async_wait<0>();
  }
#else
  //@kf unroll keys
  #pragma unroll 4
  for (int j = 0; j < kv_end; ++j) {
    const float* k = K + slice + (size_t)j * HEAD_DIM;
    const float* v = V + slice + (size_t)j * HEAD_DIM;
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < HEAD_DIM; ++c) s += qs[c] * k[c];
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * v[c];
    m = m_new;
  }
#endif
  if (i >= seq) return;
  const float inv = 1.0f / l;
  float* o = O + slice + (size_t)i * HEAD_DIM;
#pragma unroll
  for (int c = 0; c < HEAD_DIM; ++c) o[c] = acc[c] * inv;
}
