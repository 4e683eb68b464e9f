// Matrix product of bf16 inputs with f32 accumulation and output, all row-major:
//   C = A B,  A [M x K] bf16, B [K x N] bf16, C [M x N] f32
// bf16 values are passed as their 16-bit patterns (unsigned short): no cuda_bf16.h is needed (NVRTC has
// no CUDA include path here), and a bf16 is the upper half of the f32 with the same value.
//
// Two alternative implementations of the product, chosen by the `tensor_core` transform at the site
// `gemm` (the scalar one is active in the source and is the baseline):
//   scalar  CUDA-core FMAs. Baseline: one thread per output element, a 16 x 16 block, operands read from
//           global memory. Tuning parameters as in sgemm.cu: block_size_x, block_size_y (threads along N
//           and M), thread_m, thread_n (a register tile per thread, strided by the block size), use_shared
//           and tile_k (stage tile_k-deep slices of A and B in shared memory).
//   mma     tensor cores through the PTX instruction mma.sync.m16n8k16 (bf16 x bf16 + f32): a block of
//           warps_m x warps_n warps computes a (16*warps_m*warp_tiles_m) x (8*warps_n*warp_tiles_n) tile of
//           C, each warp warp_tiles_m x warp_tiles_n instruction tiles of 16 x 8; A and B go through shared
//           memory 32 deep along K (zeros past the edges). The launch geometry follows the choice (see
//           kernel.yaml).
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
#ifndef warps_m
#define warps_m 2
#endif
#ifndef warps_n
#define warps_n 2
#endif
#ifndef warp_tiles_m
#define warp_tiles_m 2
#endif
#ifndef warp_tiles_n
#define warp_tiles_n 4
#endif

// The block size of each alternative (for launch bounds).
//@kf tensor_core gemm begin=scalar
#if 1
#define GEMM_THREADS (block_size_x * block_size_y)
#endif
//@kf tensor_core gemm begin=mma
#if 0
#define GEMM_THREADS (32 * warps_m * warps_n)
#endif
//@kf tensor_core gemm end

__device__ __forceinline__ float bf16_to_float(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}

// D += A B for one warp: A 16x16 (row-major fragment, 4 registers of 2 bf16), B 16x8 (column fragment, 2
// registers), D 16x8 f32 (4 registers). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16".
__device__ __forceinline__ void mma_m16n8k16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#define BLOCK_M (block_size_y * thread_m)
#define BLOCK_N (block_size_x * thread_n)
#define TC_BM (16 * warps_m * warp_tiles_m)
#define TC_BN (8 * warps_n * warp_tiles_n)
#define TC_BK 32
#define TC_PAD 8  // bf16 elements of padding per shared row: rows stay 16-byte aligned, banks spread

extern "C" __global__ void gemm_bf16(int M, int N, int K, const unsigned short* A, const unsigned short* B,
                                     float* C) {
//@kf tensor_core gemm begin=scalar
#if 1
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
  float acc[thread_m][thread_n];
#pragma unroll
  for (int i = 0; i < thread_m; ++i)
#pragma unroll
    for (int j = 0; j < thread_n; ++j) acc[i][j] = 0.0f;
#if use_shared
  __shared__ float As[tile_k][BLOCK_M];  // converted to f32 once, k-major: As[k][m]
  __shared__ float Bs[tile_k][BLOCK_N];
  const int tid = threadIdx.y * block_size_x + threadIdx.x;
  //@kf unroll k_tiles
  for (int k0 = 0; k0 < K; k0 += tile_k) {
    for (int e = tid; e < BLOCK_M * tile_k; e += block_size_x * block_size_y) {
      const int r = e / tile_k, kk = e % tile_k;
      const int gm = m0 + r, gk = k0 + kk;
      As[kk][r] = (gm < M && gk < K) ? bf16_to_float(A[(size_t)gm * K + gk]) : 0.0f;
    }
    for (int e = tid; e < tile_k * BLOCK_N; e += block_size_x * block_size_y) {
      const int kk = e / BLOCK_N, c = e % BLOCK_N;
      const int gk = k0 + kk, gn = n0 + c;
      Bs[kk][c] = (gk < K && gn < N) ? bf16_to_float(B[(size_t)gk * N + gn]) : 0.0f;
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
  //@kf unroll k_tiles
  for (int k = 0; k < K; ++k) {
    float a[thread_m], b[thread_n];
#pragma unroll
    for (int i = 0; i < thread_m; ++i) {
      const int m = m0 + threadIdx.y + i * block_size_y;
      a[i] = m < M ? bf16_to_float(A[(size_t)m * K + k]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < thread_n; ++j) {
      const int n = n0 + threadIdx.x + j * block_size_x;
      b[j] = n < N ? bf16_to_float(B[(size_t)k * N + n]) : 0.0f;
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
//@kf tensor_core gemm begin=mma
#if 0
  // A tile row-major (m, k); B tile transposed to (n, k), so that both fragments read two consecutive k
  // values (one 32-bit word) per register.
  __shared__ __align__(16) unsigned short As[TC_BM][TC_BK + TC_PAD];
  __shared__ __align__(16) unsigned short Bs[TC_BN][TC_BK + TC_PAD];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;  // the fragment's row group and thread in group
  const int wm = warp % warps_m, wn = warp / warps_m;
  const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
  float acc[warp_tiles_m][warp_tiles_n][4];
#pragma unroll
  for (int i = 0; i < warp_tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < warp_tiles_n; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
  //@kf unroll mma_k_tiles
  for (int k0 = 0; k0 < K; k0 += TC_BK) {
    for (int e = tid; e < TC_BM * TC_BK; e += GEMM_THREADS) {
      const int r = e / TC_BK, kk = e % TC_BK;
      const int gm = m0 + r, gk = k0 + kk;
      As[r][kk] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : (unsigned short)0;
    }
    for (int e = tid; e < TC_BK * TC_BN; e += GEMM_THREADS) {
      const int kk = e / TC_BN, c = e % TC_BN;
      const int gk = k0 + kk, gn = n0 + c;
      Bs[c][kk] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : (unsigned short)0;
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < TC_BK; ks += 16) {
      unsigned int a[warp_tiles_m][4], b[warp_tiles_n][2];
#pragma unroll
      for (int i = 0; i < warp_tiles_m; ++i) {
        const int r = (wm * warp_tiles_m + i) * 16 + g;
        a[i][0] = *(const unsigned int*)&As[r][ks + 2 * t];
        a[i][1] = *(const unsigned int*)&As[r + 8][ks + 2 * t];
        a[i][2] = *(const unsigned int*)&As[r][ks + 2 * t + 8];
        a[i][3] = *(const unsigned int*)&As[r + 8][ks + 2 * t + 8];
      }
#pragma unroll
      for (int j = 0; j < warp_tiles_n; ++j) {
        const int c = (wn * warp_tiles_n + j) * 8 + g;
        b[j][0] = *(const unsigned int*)&Bs[c][ks + 2 * t];
        b[j][1] = *(const unsigned int*)&Bs[c][ks + 2 * t + 8];
      }
#pragma unroll
      for (int i = 0; i < warp_tiles_m; ++i)
#pragma unroll
        for (int j = 0; j < warp_tiles_n; ++j) mma_m16n8k16(acc[i][j], a[i], b[j]);
    }
    __syncthreads();
  }
  // D fragment: registers 0, 1 at (row g, columns 2t, 2t+1), registers 2, 3 at row g + 8.
#pragma unroll
  for (int i = 0; i < warp_tiles_m; ++i) {
#pragma unroll
    for (int j = 0; j < warp_tiles_n; ++j) {
      const int r = m0 + (wm * warp_tiles_m + i) * 16 + g;
      const int c = n0 + (wn * warp_tiles_n + j) * 8 + 2 * t;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int rr = r + (q >= 2 ? 8 : 0), cc = c + (q & 1);
        if (rr < M && cc < N) C[(size_t)rr * N + cc] = acc[i][j][q];
      }
    }
  }
#endif
//@kf tensor_core gemm end
}
