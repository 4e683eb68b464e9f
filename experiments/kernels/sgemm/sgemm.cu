// Single-precision matrix product C = A B, all row-major: A is [M x K], B is [K x N], C is [M x N].
//
// Baseline: one thread per output element, a 16 x 16 block; each thread reads a row of A and a column of B
// straight from global memory (the caches do the rest).
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x, block_size_y  threads per block along N (columns of C) and along M (rows of C)
//   thread_m, thread_n          outputs per thread along M and N, strided by the block size (a register
//                               tile: each value of A is reused thread_n times, each value of B thread_m
//                               times); the block computes (block_size_y*thread_m) x (block_size_x*thread_n)
//   use_shared                  1: the block stages tile_k-wide slices of A and B in shared memory and
//                               every thread reads its operands from there
//   tile_k                      the depth of a staged slice (with use_shared)
// Transform sites (kernel.yaml): `pipeline k_tiles`, the staged loop with cp.async copies issued one or two
// slices ahead (its load part: guarded copies into As and Bs, a barrier, the compute part, a barrier);
// `unroll k_inner`, the loop over a staged slice; `unroll k_loop`, the k loop of the unstaged version.
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

#define BLOCK_M (block_size_y * thread_m)  // rows of C per block
#define BLOCK_N (block_size_x * thread_n)  // columns of C per block
#define THREADS (block_size_x * block_size_y)

extern "C" __global__ void sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
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
}
