#define block_size_x 16
#define block_size_y 16
#define thread_m 1
#define thread_n 1
#define use_shared 0
#define tile_k 16
#define tiled_bm 64
#define tiled_bn 128
#define tiled_bk 16
#define tiled_tm 8
#define tiled_tn 8
#define tiled_group 1
#line 1 "sgemm.cu"
// Single-precision matrix product C = A B, all row-major: A is [M x K], B is [K x N], C is [M x N].
//
// Two alternative implementations, chosen by the `tensor_core` transform at the site `gemm` (kernel.yaml's
// instance `impl`; neither uses tensor cores: the operator only switches between alternative blocks):
//   simple  (active in the source, the baseline) one thread per output element by default, a 16 x 16
//           block; each thread reads a row of A and a column of B straight from global memory (the caches
//           do the rest). Tuning parameters (macros; the defaults are the baseline):
//             block_size_x, block_size_y  threads per block along N (columns of C) and along M (rows of C)
//             thread_m, thread_n          outputs per thread along M and N, strided by the block size (a
//                                         register tile: each value of A is reused thread_n times, each
//                                         value of B thread_m times); the block computes
//                                         (block_size_y*thread_m) x (block_size_x*thread_n)
//             use_shared                  1: the block stages tile_k-wide slices of A and B in shared
//                                         memory and every thread reads its operands from there
//             tile_k                      the depth of a staged slice (with use_shared)
//           Transform sites: `pipeline k_tiles`, the staged loop with cp.async copies issued one or two
//           slices ahead (its load part: guarded copies into As and Bs, a barrier, the compute part, a
//           barrier); `unroll k_inner`, the loop over a staged slice; `unroll k_loop`, the k loop of the
//           unstaged version.
//   tiled   a block-tiled, register-blocked, double-buffered CUDA-core GEMM (sgemm_tiled below): a block of
//           (tiled_bm / tiled_tm) x (tiled_bn / tiled_tn) threads computes a tiled_bm x tiled_bn tile of C,
//           each thread a tiled_tm x tiled_tn register tile made of 4 x 4 sub-tiles spaced apart; tiled_bk
//           deep slices of A (stored transposed, k-major) and B go through a two-slot shared-memory ring
//           with the next slice prefetched into registers (128-bit loads) while the current one is
//           multiplied; blocks are rasterised in groups of tiled_group tile rows (L2 reuse). One-dimensional
//           blocks; dynamic shared memory (kernel.yaml's shared_memory expression, sgemm_tiled_layout's
//           smem_bytes).
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef thread_m
#define thread_m 1
#endif
#ifndef thread_n
#define thread_n 1
#endif
#ifndef use_shared
#define use_shared 0
#endif
#ifndef tile_k
#define tile_k 16
#endif
#ifndef tiled_bm
#define tiled_bm 128
#endif
#ifndef tiled_bn
#define tiled_bn 128
#endif
#ifndef tiled_bk
#define tiled_bk 8
#endif
#ifndef tiled_tm
#define tiled_tm 8
#endif
#ifndef tiled_tn
#define tiled_tn 8
#endif
#ifndef tiled_group
#define tiled_group 8
#endif

// GEMM_THREADS: the block size of the chosen alternative (the launch_bounds instance's bound).
//@kf tensor_core gemm begin=simple
#if 0
#define GEMM_THREADS (block_size_x * block_size_y)
#endif
//@kf tensor_core gemm begin=tiled
#if 1
#define GEMM_THREADS ((tiled_bm / tiled_tm) * (tiled_bn / tiled_tn))
#endif
//@kf tensor_core gemm end

// ---------------------------------------------------------------------------------------------------------
// The tiled alternative. Defined for every variant (a template: it costs nothing until instantiated), used
// by the `tiled` group of the entry and by the host emulation test (tests/unit/sgemm_tiled_emulation_test.cpp
// includes this file and runs sgemm_tiled on the CPU, thread by thread, with the CUDA built-ins replaced).
//
// Geometry of a block (BM x BN tile of C, BK-deep k slices, TM x TN outputs per thread):
//   threads_n = BN / TN threads along N, threads_m = BM / TM along M, one-dimensional block of
//   threads_m * threads_n threads. Warp w, lane l: thread column tx = (w % (threads_n / 8)) * 8 + l % 8,
//   thread row ty = (w / (threads_n / 8)) * 4 + l / 8 (a warp is 4 x 8 threads).
//   Thread (ty, tx) owns rows g * (BM / (TM / 4)) + 4 ty + i (g < TM / 4, i < 4) and columns
//   h * (BN / (TN / 4)) + 4 tx + j (h < TN / 4, j < 4) of the tile: 4 x 4 sub-tiles spaced a fraction of
//   the tile apart, so that each shared-memory read is one float4 and the lanes of a warp read 4 (A) or 8
//   (B) consecutive float4: 64 or 128 contiguous bytes, no bank conflict.
// Shared memory (floats, from `smem`, 16-byte aligned): two slots of [As | Bs]:
//   As[k][m] at k * lda + m, lda = BM + 4 (A transposed: k-major; the 4 pad floats keep rows 16-byte
//     aligned and put the k rows that the two 4-k chunks of an 8-deep slice write 16 banks apart: the
//     transposing stores are conflict-free at BK = 8, 2-way at BK = 16);
//   Bs[k][n] at a_slot + k * BN + n (as in global memory).
// Global -> registers -> shared: thread t loads A's float4s (row a_row + i * a_row_step, k chunk a_k, i <
// a_loads) and B's (k-row b_row + i * b_row_step, n chunk b_n, i < b_loads) of the next slice while the
// current slice is multiplied, then writes them into the other slot; one barrier per slice. 128-bit loads
// when the rows of A and B are 16-byte aligned (K % 4 == 0, N % 4 == 0, 16-byte aligned base pointers),
// element by element otherwise; zeros past the edges of A and B (they add nothing). Stores: float4 where N %
// 4 == 0 and C is 16-byte aligned, element by element otherwise; only inside C.
template <int BM, int BN, int BK, int TM, int TN>
struct sgemm_tiled_layout {
  static constexpr int threads_n = BN / TN, threads_m = BM / TM, threads = threads_n * threads_m;
  static constexpr int groups_m = TM / 4, groups_n = TN / 4;  // 4 x 4 sub-tiles per thread
  static constexpr int group_step_m = BM / groups_m, group_step_n = BN / groups_n;
  static constexpr int lda = BM + 4, ldb = BN;
  static constexpr int a_slot = BK * lda, slot = a_slot + BK * ldb;  // floats
  static constexpr int smem_bytes = 2 * slot * 4;
  static constexpr int a_chunks = BK / 4, b_chunks = BN / 4;  // float4s per row of A's slice, B's slice
  static constexpr int a_loads = BM * a_chunks / threads, b_loads = BK * b_chunks / threads;
  static constexpr int a_row_step = threads / a_chunks, b_row_step = threads / b_chunks;
};

// One block's tile of C at (m0, n0). VEC: A's and B's rows are 16-byte aligned (K % 4 == 0, N % 4 == 0,
// 16-byte aligned A and B), so every slice is read with 128-bit loads; otherwise element by element. The
// two kinds are separate instantiations so that the element-wise path (odd shapes only) costs the 128-bit
// one no registers.
template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__device__ __forceinline__ void sgemm_tiled_tile(int M, int N, int K, const float* A, const float* B,
                                                 float* C, float* smem, int m0, int n0) {
  using L = sgemm_tiled_layout<BM, BN, BK, TM, TN>;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int tx = warp % (L::threads_n / 8) * 8 + lane % 8;
  const int ty = warp / (L::threads_n / 8) * 4 + lane / 8;

  // This thread's share of a slice (see the layout above): A's float4s at rows a_row + i * a_row_step,
  // k = k0 + a_k .. +3; B's at k-rows k0 + b_row + i * b_row_step, columns n0 + b_n .. +3. The sources
  // start at slice 0 and are only dereferenced inside A and B.
  const int a_k = tid % L::a_chunks * 4, a_row = tid / L::a_chunks;
  const int b_n = tid % L::b_chunks * 4, b_row = tid / L::b_chunks;
  const float* a_src = A + (size_t)(m0 + a_row) * K + a_k;
  const float* b_src = B + (size_t)b_row * N + n0 + b_n;
  unsigned a_rows_in = 0;  // bit i: A's row of load i is inside A
#pragma unroll
  for (int i = 0; i < L::a_loads; ++i) a_rows_in |= (m0 + a_row + i * L::a_row_step < M ? 1u : 0u) << i;
  const int b_cols_left = N - n0 - b_n;  // columns of B left from this thread's first one

  float4 pa[L::a_loads], pb[L::b_loads];  // the prefetched slice
  // Reads the slice starting at k0 into pa and pb (zeros outside A and B).
  auto load = [&](int k0) {
    const int a_k_left = K - k0 - a_k;
#pragma unroll
    for (int i = 0; i < L::a_loads; ++i) {
      const float* p = a_src + (size_t)i * L::a_row_step * K + k0;
      const bool row_in = (a_rows_in >> i & 1u) != 0;
      if (VEC) {  // a_k_left > 0 implies a_k_left >= 4 (K and a_k are multiples of 4)
        pa[i] = row_in && a_k_left > 0 ? __ldg(reinterpret_cast<const float4*>(p))
                                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      } else {
        pa[i].x = row_in && a_k_left > 0 ? __ldg(p) : 0.0f;
        pa[i].y = row_in && a_k_left > 1 ? __ldg(p + 1) : 0.0f;
        pa[i].z = row_in && a_k_left > 2 ? __ldg(p + 2) : 0.0f;
        pa[i].w = row_in && a_k_left > 3 ? __ldg(p + 3) : 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < L::b_loads; ++i) {
      const bool row_in = k0 + b_row + i * L::b_row_step < K;
      const float* p = b_src + (size_t)(k0 + i * L::b_row_step) * N;
      if (VEC) {  // b_cols_left > 0 implies b_cols_left >= 4 (N, n0 and b_n are multiples of 4)
        pb[i] = row_in && b_cols_left > 0 ? __ldg(reinterpret_cast<const float4*>(p))
                                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      } else {
        pb[i].x = row_in && b_cols_left > 0 ? __ldg(p) : 0.0f;
        pb[i].y = row_in && b_cols_left > 1 ? __ldg(p + 1) : 0.0f;
        pb[i].z = row_in && b_cols_left > 2 ? __ldg(p + 2) : 0.0f;
        pb[i].w = row_in && b_cols_left > 3 ? __ldg(p + 3) : 0.0f;
      }
    }
  };
  // Writes pa and pb into the slot at `s`: A transposed (four k rows), B as it is.
  auto store = [&](float* s) {
#pragma unroll
    for (int i = 0; i < L::a_loads; ++i) {
      float* d = s + a_k * L::lda + a_row + i * L::a_row_step;
      d[0] = pa[i].x;
      d[L::lda] = pa[i].y;
      d[2 * L::lda] = pa[i].z;
      d[3 * L::lda] = pa[i].w;
    }
#pragma unroll
    for (int i = 0; i < L::b_loads; ++i)
      *reinterpret_cast<float4*>(s + L::a_slot + (b_row + i * L::b_row_step) * L::ldb + b_n) = pb[i];
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int k_tiles = (K + BK - 1) / BK;
  if (k_tiles > 0) {
    load(0);
    store(smem);
  }
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Slot kt % 2 holds slice kt (complete after the barrier above); slot (kt + 1) % 2 was last read in
    // iteration kt - 1, which every thread finished before that barrier, so it can be refilled now. The
    // next slice's loads are issued first and are in flight while this slice is multiplied; in the last
    // iteration they are all outside K (zeros, no memory access) and fill a slot nobody reads. (Made
    // conditional on kt + 1 < k_tiles, the loads were moved down next to the stores by the compiler.)
    const float* s = smem + (kt & 1) * L::slot;
    load((kt + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int g = 0; g < L::groups_m; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(s + kk * L::lda + g * L::group_step_m + 4 * ty);
        a[4 * g] = v.x;
        a[4 * g + 1] = v.y;
        a[4 * g + 2] = v.z;
        a[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int h = 0; h < L::groups_n; ++h) {
        const float4 v =
            *reinterpret_cast<const float4*>(s + L::a_slot + kk * L::ldb + h * L::group_step_n + 4 * tx);
        b[4 * h] = v.x;
        b[4 * h + 1] = v.y;
        b[4 * h + 2] = v.z;
        b[4 * h + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    store(smem + ((kt + 1) & 1) * L::slot);
    __syncthreads();
  }

  // Stores: float4 where N % 4 == 0 and C is 16-byte aligned (then n < N implies n + 3 < N).
  const bool vec_c = N % 4 == 0 && reinterpret_cast<unsigned long long>(C) % 16 == 0;
#pragma unroll
  for (int g = 0; g < L::groups_m; ++g) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + g * L::group_step_m + 4 * ty + i;
      if (m >= M) continue;
      const float* r = acc[4 * g + i];
#pragma unroll
      for (int h = 0; h < L::groups_n; ++h) {
        const int n = n0 + h * L::group_step_n + 4 * tx;
        float* out = C + (size_t)m * N + n;
        if (vec_c && n < N) {
          *reinterpret_cast<float4*>(out) = make_float4(r[4 * h], r[4 * h + 1], r[4 * h + 2], r[4 * h + 3]);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (n + j < N) out[j] = r[4 * h + j];
        }
      }
    }
  }
}

// The tiled kernel's body: a one-dimensional block of sgemm_tiled_layout<...>::threads threads, `smem`
// 16-byte aligned with smem_bytes bytes, grid (ceil(N / BN), ceil(M / BM)).
template <int BM, int BN, int BK, int TM, int TN, int GROUP>
__device__ __forceinline__ void sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C,
                                            float* smem) {
  using L = sgemm_tiled_layout<BM, BN, BK, TM, TN>;
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "4 x 4 sub-tiles, 4-deep k chunks");
  static_assert(BM % TM == 0 && BN % TN == 0 && GROUP >= 1, "whole thread tiles");
  static_assert(L::threads_n % 8 == 0 && L::threads_m % 4 == 0, "warps of 4 x 8 threads");
  static_assert(L::threads % L::a_chunks == 0 && L::threads % L::b_chunks == 0, "fixed chunk per thread");
  static_assert(L::a_loads >= 1 && L::a_loads * L::threads == BM * L::a_chunks, "A's slice divides");
  static_assert(L::b_loads >= 1 && L::b_loads * L::threads == BK * L::b_chunks, "B's slice divides");
  static_assert(L::a_loads <= 32, "row bits in one word");

  // This block's tile: blocks in launch order walk down groups of GROUP tile rows, column by column, so
  // that the blocks running together share B's columns and A's rows in L2. A bijection of the grid
  // (gridDim.x = tiles along N, gridDim.y = tiles along M).
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int lin = blockIdx.y * tiles_n + blockIdx.x;
  const int group_tiles = GROUP * tiles_n;
  const int first_m = lin / group_tiles * GROUP;
  const int group_rows = min(tiles_m - first_m, GROUP);
  const int m0 = (first_m + lin % group_tiles % group_rows) * BM;
  const int n0 = lin % group_tiles / group_rows * BN;

  const bool vec = K % 4 == 0 && N % 4 == 0 && reinterpret_cast<unsigned long long>(A) % 16 == 0 &&
                   reinterpret_cast<unsigned long long>(B) % 16 == 0;
  if (vec)
    sgemm_tiled_tile<BM, BN, BK, TM, TN, true>(M, N, K, A, B, C, smem, m0, n0);
  else
    sgemm_tiled_tile<BM, BN, BK, TM, TN, false>(M, N, K, A, B, C, smem, m0, n0);
}
// ---------------------------------------------------------------------------------------------------------

#define BLOCK_M (block_size_y * thread_m)  // rows of C per block
#define BLOCK_N (block_size_x * thread_n)  // columns of C per block
#define THREADS (block_size_x * block_size_y)

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1) sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
//@kf tensor_core gemm begin=simple
#if 0
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
  float acc[thread_m][thread_n];
#pragma unroll
  for (int i = 0; i < thread_m; ++i)
#pragma unroll
    for (int j = 0; j < thread_n; ++j) acc[i][j] = 0.0f;
#if use_shared
  __shared__ float As[tile_k][BLOCK_M];  // A's slice, k-major: As[k][m]
  __shared__ float Bs[tile_k][BLOCK_N];  // B's slice: Bs[k][n]
  const int tid = threadIdx.y * block_size_x + threadIdx.x;
  //@kf pipeline k_tiles buffers=As,Bs
  for (int k0 = 0; k0 < K; k0 += tile_k) {
    // Stage the slices; elements outside the matrices are zeros (they add nothing).
    for (int e = tid; e < BLOCK_M * tile_k; e += THREADS) {
      const int r = e / tile_k, kk = e % tile_k;  // consecutive threads: consecutive k, coalesced in A
      const int gm = m0 + r, gk = k0 + kk;
      As[kk][r] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : 0.0f;
    }
    for (int e = tid; e < tile_k * BLOCK_N; e += THREADS) {
      const int kk = e / BLOCK_N, c = e % BLOCK_N;
      const int gk = k0 + kk, gn = n0 + c;
      Bs[kk][c] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : 0.0f;
    }
    __syncthreads();
    //@kf unroll k_inner
    for (int kk = 0; kk < tile_k; ++kk) {
      float a[thread_m], b[thread_n];
#pragma unroll
      for (int i = 0; i < thread_m; ++i) a[i] = As[kk][threadIdx.y + i * block_size_y];
#pragma unroll
      for (int j = 0; j < thread_n; ++j) b[j] = Bs[kk][threadIdx.x + j * block_size_x];
#pragma unroll
      for (int i = 0; i < thread_m; ++i)
#pragma unroll
        for (int j = 0; j < thread_n; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#else
  //@kf unroll k_loop
  for (int k = 0; k < K; ++k) {
    float a[thread_m], b[thread_n];
#pragma unroll
    for (int i = 0; i < thread_m; ++i) {
      const int m = m0 + threadIdx.y + i * block_size_y;
      a[i] = m < M ? A[(size_t)m * K + k] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < thread_n; ++j) {
      const int n = n0 + threadIdx.x + j * block_size_x;
      b[j] = n < N ? B[(size_t)k * N + n] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < thread_m; ++i)
#pragma unroll
      for (int j = 0; j < thread_n; ++j) acc[i][j] += a[i] * b[j];
  }
#endif
#pragma unroll
  for (int i = 0; i < thread_m; ++i) {
    const int m = m0 + threadIdx.y + i * block_size_y;
#pragma unroll
    for (int j = 0; j < thread_n; ++j) {
      const int n = n0 + threadIdx.x + j * block_size_x;
      if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j];
    }
  }
#endif
//@kf tensor_core gemm begin=tiled
#if 1
  // A one-dimensional block of GEMM_THREADS threads; sgemm_tiled_layout<...>::smem_bytes of dynamic shared
  // memory (kernel.yaml: shared_memory).
  extern __shared__ float4 sgemm_tiled_smem[];
  sgemm_tiled<tiled_bm, tiled_bn, tiled_bk, tiled_tm, tiled_tn, tiled_group>(
      M, N, K, A, B, C, reinterpret_cast<float*>(sgemm_tiled_smem));
#endif
//@kf tensor_core gemm end
}
