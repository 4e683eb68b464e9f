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

extern "C" __global__ void attention(int bh, int seq, int causal, float scale, const float* Q, const float* K,
                                     const float* V, float* O) {
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
  __shared__ float Ks[kv_tile][HEAD_DIM], Vs[kv_tile][HEAD_DIM];
  // Keys any query of this block needs.
  const int block_last = min(seq, (int)(blockIdx.x * block_size + block_size)) - 1;
  const int block_end = causal ? block_last + 1 : seq;
  //@kf pipeline kv_tiles buffers=Ks,Vs
  for (int j0 = 0; j0 < block_end; j0 += kv_tile) {
    for (int e = threadIdx.x; e < kv_tile * HEAD_DIM; e += block_size) {
      const int r = e / HEAD_DIM, c = e % HEAD_DIM;
      Ks[r][c] = (j0 + r < seq) ? K[slice + (size_t)(j0 + r) * HEAD_DIM + c] : 0.0f;
      Vs[r][c] = (j0 + r < seq) ? V[slice + (size_t)(j0 + r) * HEAD_DIM + c] : 0.0f;
    }
    __syncthreads();
    const int n = min(kv_tile, kv_end - j0);  // this query's keys in the tile (none when n <= 0)
    //@kf unroll keys
    for (int jj = 0; jj < n; ++jj) {
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < HEAD_DIM; ++c) s += qs[c] * Ks[jj][c];
      const float m_new = fmaxf(m, s);
      const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
      const float p = expf(s - m_new);
      l = l * correction + p;
#pragma unroll
      for (int c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * Vs[jj][c];
      m = m_new;
    }
    __syncthreads();
  }
#else
  //@kf unroll keys
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
