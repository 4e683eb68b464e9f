#define block_size 64
#define use_shared 0
#define kv_tile 32
#define tiled_bq 128
#define tiled_bk 64
#define tiled_tq 8
#define tiled_tk 8
#line 1 "attention.cu"
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
//
// Two alternative implementations, chosen by the `tensor_core` transform at the site `impl` (kernel.yaml's
// instance `impl`; no tensor cores either way, the operator only switches alternative blocks):
//   row    (active in the source, the baseline) the one-thread-per-query kernel above, with the parameters
//          and sites above;
//   tiled  a register-blocked, flash-attention-style CUDA-core kernel (attention_tiled below): a block owns
//          tiled_bq queries of one slice and walks over tiles of tiled_bk keys; each thread computes a
//          tiled_tq x tiled_tk block of scores and a tiled_tq x (64 tiled_tk / tiled_bk) block of the
//          output, in fp32 FFMA. Parameters (macros):
//            tiled_bq  queries per block (64, 128)
//            tiled_bk  keys per tile (32, 64)
//            tiled_tq  queries per thread (4, 8)
//            tiled_tk  keys per thread and tile (4, 8); tiled_bk / tiled_tk (8 or 16) threads share a query
//          Dynamic shared memory (kernel.yaml's shared_memory expression, attention_tiled_layout's
//          smem_bytes); Q, K, V and O 16-byte aligned (the runner's buffers are).
#ifndef block_size
#define block_size 64
#endif
#ifndef use_shared
#define use_shared 0
#endif
#ifndef kv_tile
#define kv_tile 32
#endif
#ifndef tiled_bq
#define tiled_bq 64
#endif
#ifndef tiled_bk
#define tiled_bk 64
#endif
#ifndef tiled_tq
#define tiled_tq 4
#endif
#ifndef tiled_tk
#define tiled_tk 8
#endif

#define NEG_INF __int_as_float(0xff800000u)  // -infinity (NVRTC has no math.h here)

#define HEAD_DIM 64

// ATTN_THREADS: the block size of the chosen alternative (the launch_bounds instance's bound).
//@kf tensor_core impl begin=row
#if 0
#define ATTN_THREADS block_size
#endif
//@kf tensor_core impl begin=tiled
#if 1
#define ATTN_THREADS ((tiled_bq / tiled_tq) * (tiled_bk / tiled_tk))
#endif
//@kf tensor_core impl end

// ---------------------------------------------------------------------------------------------------------
// The tiled alternative. Defined for every variant (a template: it costs nothing until instantiated), used
// by the `tiled` group of the entry and by the host emulation test (tests/unit/attention_tiled_test.cpp
// includes this file and runs attention_tiled on the CPU, thread by thread, with the CUDA built-ins
// replaced).
//
// Geometry (BQ queries per block, BK keys per tile, TQ x TK scores per thread):
//   threads_k = BK / TK (8 or 16) threads share a query row, threads_q = BQ / TQ rows of threads; thread
//   tid is (ty, tx) = (tid / threads_k, tid % threads_k), so the threads_k threads of a row are
//   consecutive lanes of one warp (32 % threads_k == 0): row statistics are reduced with __shfl_xor_sync
//   over lane offsets 1 .. threads_k / 2.
//   Thread (ty, tx) owns queries 4 ty + i + h (BQ / 2) (i < 4, h < TQ / 4) of the block, keys
//   4 tx + j + h (BK / 2) (j < 4, h < TK / 4) of each tile, and output columns 4 tx + j + h 32 (j < 4,
//   h < TD / 4, TD = 64 / threads_k = 64 TK / BK columns): 4-wide groups, so every shared-memory read is a
//   float4.
// Shared memory (floats from `smem`, 16-byte aligned):
//   Qs[d][q]  at d BQ + q: the block's queries, transposed, times scale * log2(e) (written once);
//   Ks[d][k]  at qs_size + d BK + 4 (k / 4 ^ 4 ((d / 4) % 2)) + k % 4: the key tile, transposed, its
//             float4 groups swizzled by d so that the transposing stores (16 keys x 2 d-chunks per warp)
//             hit 32 different banks; a read of row d by a warp stays conflict-free (the swizzle is uniform
//             across the warp);
//   Vs[k][c]  at vs_base + k 64 + c: the value tile as in memory;
//   Ps[k][q]  at ps_base + k BQ + 4 (q / 4 ^ (k / 4) % 8) + q % 4: the tile's probabilities, transposed
//             (each thread stores float4s of 4 queries for one key), query groups swizzled by k so that the
//             8 lanes of a quarter warp (same ty, 8 consecutive tx, so 8 different k / 4) store into
//             different banks; reads (one k across the warp) stay conflict-free.
//   Keys past seq are zeros in Ks and Vs and are masked (score -inf, probability 0).
// Per key tile: stage K and V (128-bit __ldg; K with 16 keys x 2 d-chunks per warp, V row by row),
// barrier; S = Q K^T over d (TQ + TK floats loaded per d-step), mask (key < seq and, causal, key <= query),
// online softmax (row maximum over the tile reduced across the row's threads; the running maximum m, the
// thread's partial running sum l and the output rows rescaled by 2^(m_old - m_new)), P = 2^(S - m) into Ps,
// barrier; O += P V over the tile's keys, barrier (before the next tile overwrites Ks, Vs, Ps). Scores are
// in log2 units (Q pre-scaled by scale * log2(e)), so that exp2f gives the exponentials.
// Key 0 is attended by every row (any query >= 0, seq >= 1), so the running maximum is finite after the
// first tile; a tile whose keys are all masked for a row leaves it unchanged (probabilities 0, correction
// 1). Should the maximum still be -inf, 0 is used as the base, so that no -inf - -inf (NaN) arises. The
// running sum of every row is >= 1 at the end (its maximum contributes 2^0): no division by zero.
// Causal: tiles past the block's last query are skipped; blocks are taken in reverse order of their
// queries (the longest first). Queries past seq compute on zero-filled rows of Qs and do not write.
template <int BQ, int BK, int TQ, int TK>
struct attention_tiled_layout {
  static constexpr int threads_k = BK / TK, threads_q = BQ / TQ, threads = threads_q * threads_k;
  static constexpr int td = HEAD_DIM / threads_k;  // output columns per thread
  static constexpr int qs_size = HEAD_DIM * BQ, ks_size = HEAD_DIM * BK, vs_size = BK * HEAD_DIM;
  static constexpr int ks_base = qs_size, vs_base = ks_base + ks_size, ps_base = vs_base + vs_size;
  static constexpr int smem_bytes = (ps_base + BK * BQ) * 4;
  static_assert(threads_k == 8 || threads_k == 16, "8 or 16 threads per query row");
  static_assert(TQ % 4 == 0 && TK % 4 == 0 && td % 4 == 0, "4-wide groups");
  static_assert(BQ % 32 == 0 && BK % 32 == 0, "swizzles need 8 groups per row");
  static_assert(TQ / 4 == 1 || 4 * threads_q <= BQ / 2, "query sub-tiles half a block apart");
  static_assert(TK / 4 == 1 || 4 * threads_k <= BK / 2, "key sub-tiles half a tile apart");
};

// The tile of queries qb * BQ .. of slice b. A one-dimensional block of attention_tiled_layout::threads
// threads; smem: smem_bytes of shared memory, 16-byte aligned.
template <int BQ, int BK, int TQ, int TK>
__device__ __forceinline__ void attention_tiled(int seq, int causal, float scale, const float* Q,
                                                const float* K, const float* V, float* O, float* smem,
                                                int qb, int b) {
  using L = attention_tiled_layout<BQ, BK, TQ, TK>;
  constexpr int TD = L::td, GQ = TQ / 4, GK = TK / 4, GD = TD / 4;
  const int tid = threadIdx.x;
  const int ty = tid / L::threads_k, tx = tid % L::threads_k;
  const int q0 = qb * BQ;
  const size_t slice = (size_t)b * seq * HEAD_DIM;
  float* const Qs = smem;
  float* const Ks = smem + L::ks_base;
  float* const Vs = smem + L::vs_base;
  float* const Ps = smem + L::ps_base;

  // Queries (zeros past seq), scaled into log2 units, transposed into Qs.
  const float qscale = scale * 1.4426950408889634f;
  for (int e = tid; e < BQ * (HEAD_DIM / 4); e += L::threads) {
    const int r = e / (HEAD_DIM / 4), c = e % (HEAD_DIM / 4) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (q0 + r < seq) v = __ldg(reinterpret_cast<const float4*>(Q + slice + (size_t)(q0 + r) * HEAD_DIM + c));
    Qs[(c + 0) * BQ + r] = v.x * qscale;
    Qs[(c + 1) * BQ + r] = v.y * qscale;
    Qs[(c + 2) * BQ + r] = v.z * qscale;
    Qs[(c + 3) * BQ + r] = v.w * qscale;
  }

  float acc[TQ][TD], m[TQ], l[TQ];
#pragma unroll
  for (int i = 0; i < TQ; ++i) {
    m[i] = NEG_INF;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < TD; ++j) acc[i][j] = 0.0f;
  }
  // Row (query) of register row i, key of register column j, output column of register column j.
  auto row_of = [&](int i) { return 4 * ty + i % 4 + i / 4 * (BQ / 2); };
  auto key_of = [&](int j) { return 4 * tx + j % 4 + j / 4 * (BK / 2); };

  const int kv_end = causal ? min(seq, q0 + BQ) : seq;  // keys any query of the block attends to
  for (int j0 = 0; j0 < kv_end; j0 += BK) {
    // K tile: element e is key 16 (e / 256) + e % 16, d-chunk (e / 16) % 16: a warp stores 16 keys x 2
    // chunks, into 32 banks (the chunk's parity flips the swizzle's bit 2).
    for (int e = tid; e < BK * (HEAD_DIM / 4); e += L::threads) {
      const int k = e / 256 * 16 + e % 16, c = e / 16 % 16;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (j0 + k < seq) v = __ldg(reinterpret_cast<const float4*>(K + slice + (size_t)(j0 + k) * HEAD_DIM + 4 * c));
      const int col = ((k / 4) ^ ((c % 2) * 4)) * 4 + k % 4;
      Ks[(4 * c + 0) * BK + col] = v.x;
      Ks[(4 * c + 1) * BK + col] = v.y;
      Ks[(4 * c + 2) * BK + col] = v.z;
      Ks[(4 * c + 3) * BK + col] = v.w;
    }
    // V tile as in memory.
    for (int e = tid; e < BK * (HEAD_DIM / 4); e += L::threads) {
      const int k = e / (HEAD_DIM / 4), c = e % (HEAD_DIM / 4) * 4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (j0 + k < seq) v = __ldg(reinterpret_cast<const float4*>(V + slice + (size_t)(j0 + k) * HEAD_DIM + c));
      *reinterpret_cast<float4*>(Vs + k * HEAD_DIM + c) = v;
    }
    __syncthreads();

    // S = Q K^T (log2 units).
    float s[TQ][TK];
#pragma unroll
    for (int i = 0; i < TQ; ++i)
#pragma unroll
      for (int j = 0; j < TK; ++j) s[i][j] = 0.0f;
    // Eight d-steps per iteration (the K swizzle's bit, (d / 4) % 2, is known in each), not unrolled further:
    // a fully unrolled loop lets the compiler hoist loads until it needs ~255 registers.
#pragma unroll 1
    for (int d0 = 0; d0 < HEAD_DIM; d0 += 8) {
#pragma unroll
      for (int dd = 0; dd < 8; ++dd) {
      const int d = d0 + dd;
      float qf[TQ], kf[TK];
#pragma unroll
      for (int g = 0; g < GQ; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(Qs + d * BQ + 4 * ty + g * (BQ / 2));
        qf[4 * g] = v.x;
        qf[4 * g + 1] = v.y;
        qf[4 * g + 2] = v.z;
        qf[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < GK; ++g) {
        const int grp = (tx + g * (BK / 8)) ^ (dd / 4 * 4);
        const float4 v = *reinterpret_cast<const float4*>(Ks + d * BK + 4 * grp);
        kf[4 * g] = v.x;
        kf[4 * g + 1] = v.y;
        kf[4 * g + 2] = v.z;
        kf[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TQ; ++i)
#pragma unroll
        for (int j = 0; j < TK; ++j) s[i][j] += qf[i] * kf[j];
      }
    }

    // Mask, online softmax, P into Ps.
#pragma unroll
    for (int i = 0; i < TQ; ++i) {
      const int q = q0 + row_of(i);
      float mx = NEG_INF;
#pragma unroll
      for (int j = 0; j < TK; ++j) {
        const int k = j0 + key_of(j);
        if (k >= seq || (causal && k > q)) s[i][j] = NEG_INF;
        mx = fmaxf(mx, s[i][j]);
      }
#pragma unroll
      for (int off = 1; off < L::threads_k; off *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m[i], mx);
      const float base = m_new == NEG_INF ? 0.0f : m_new;  // no -inf - -inf
      const float correction = exp2f(m[i] - base);         // 0 while m is -inf
      m[i] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < TK; ++j) {
        s[i][j] = exp2f(s[i][j] - base);  // 0 for masked keys
        sum += s[i][j];
      }
      l[i] = l[i] * correction + sum;
#pragma unroll
      for (int j = 0; j < TD; ++j) acc[i][j] *= correction;
    }
#pragma unroll
    for (int j = 0; j < TK; ++j) {
      const int k = key_of(j);
#pragma unroll
      for (int g = 0; g < GQ; ++g) {
        const int grp = (ty + g * (BQ / 8)) ^ (k / 4 % 8);
        *reinterpret_cast<float4*>(Ps + k * BQ + 4 * grp) =
            make_float4(s[4 * g][j], s[4 * g + 1][j], s[4 * g + 2][j], s[4 * g + 3][j]);
      }
    }
    __syncthreads();

    // O += P V.
    // Eight keys per iteration (P's swizzle, (k / 4) % 8 = ((k0 / 4) % 8) ^ (kk / 4) for k0 a multiple of 8).
#pragma unroll 1
    for (int k0 = 0; k0 < BK; k0 += 8) {
      const int swz = k0 / 4 % 8;
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
      const int k = k0 + kk;
      float pf[TQ], vf[TD];
#pragma unroll
      for (int g = 0; g < GQ; ++g) {
        const int grp = (ty + g * (BQ / 8)) ^ swz ^ (kk / 4);
        const float4 v = *reinterpret_cast<const float4*>(Ps + k * BQ + 4 * grp);
        pf[4 * g] = v.x;
        pf[4 * g + 1] = v.y;
        pf[4 * g + 2] = v.z;
        pf[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < GD; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(Vs + k * HEAD_DIM + 4 * tx + g * 32);
        vf[4 * g] = v.x;
        vf[4 * g + 1] = v.y;
        vf[4 * g + 2] = v.z;
        vf[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TQ; ++i)
#pragma unroll
        for (int j = 0; j < TD; ++j) acc[i][j] += pf[i] * vf[j];
      }
    }
    __syncthreads();
  }

  // The row sums over all the row's threads; O = acc / l (valid rows only).
#pragma unroll
  for (int i = 0; i < TQ; ++i) {
    float sum = l[i];
#pragma unroll
    for (int off = 1; off < L::threads_k; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const int q = q0 + row_of(i);
    if (q < seq) {
      const float inv = 1.0f / sum;
      float* o = O + slice + (size_t)q * HEAD_DIM + 4 * tx;
#pragma unroll
      for (int g = 0; g < GD; ++g)
        *reinterpret_cast<float4*>(o + g * 32) = make_float4(acc[i][4 * g] * inv, acc[i][4 * g + 1] * inv,
                                                             acc[i][4 * g + 2] * inv, acc[i][4 * g + 3] * inv);
    }
  }
}
// ---------------------------------------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(ATTN_THREADS, 1) attention(int bh, int seq, int causal, float scale, const float* Q, const float* K,
                                     const float* V, float* O) {
//@kf tensor_core impl begin=row
#if 0
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
#endif
//@kf tensor_core impl begin=tiled
#if 1
  // A one-dimensional block of ATTN_THREADS threads; attention_tiled_layout<...>::smem_bytes of dynamic
  // shared memory (kernel.yaml: shared_memory). Blocks in reverse order of their queries (causal: the
  // longest first).
  extern __shared__ float4 attention_tiled_smem[];
  attention_tiled<tiled_bq, tiled_bk, tiled_tq, tiled_tk>(seq, causal, scale, Q, K, V, O,
                                                          reinterpret_cast<float*>(attention_tiled_smem),
                                                          gridDim.x - 1 - blockIdx.x, blockIdx.y);
#endif
//@kf tensor_core impl end
}
