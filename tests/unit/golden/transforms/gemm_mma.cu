// C = A * B (row-major floats; M a multiple of 16, N and K multiples of 8): one warp per 16 x 8 tile of C,
// either with scalar FMAs or with the tf32 tensor-core instruction mma.sync.m16n8k8 (input of the
// tensor_core tests). Thread (g, q) = (lane / 4, lane % 4) owns C[m0 + g + 8 * (i / 2)][n0 + 2 * q + i % 2].
__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

extern "C" __global__ void gemm16x8(int M, int N, int K, const float* A, const float* B, float* C) {
  const int lane = threadIdx.x & 31;
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
  const int g = lane >> 2, q = lane & 3;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  //@kf tensor_core mma_k begin=scalar
#if 1
  for (int k = 0; k < K; ++k)
    for (int i = 0; i < 4; ++i)
      c[i] += A[(size_t)(m0 + g + 8 * (i / 2)) * K + k] * B[(size_t)k * N + n0 + 2 * q + (i % 2)];
#endif
  //@kf tensor_core mma_k begin=mma
#if 0
  for (int k0 = 0; k0 < K; k0 += 8) {
    const unsigned a0 = to_tf32(A[(size_t)(m0 + g) * K + k0 + q]);
    const unsigned a1 = to_tf32(A[(size_t)(m0 + g + 8) * K + k0 + q]);
    const unsigned a2 = to_tf32(A[(size_t)(m0 + g) * K + k0 + q + 4]);
    const unsigned a3 = to_tf32(A[(size_t)(m0 + g + 8) * K + k0 + q + 4]);
    const unsigned b0 = to_tf32(B[(size_t)(k0 + q) * N + n0 + g]);
    const unsigned b1 = to_tf32(B[(size_t)(k0 + q + 4) * N + n0 + g]);
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#endif
  //@kf tensor_core mma_k end
  for (int i = 0; i < 4; ++i) C[(size_t)(m0 + g + 8 * (i / 2)) * N + n0 + 2 * q + (i % 2)] = c[i];
}
