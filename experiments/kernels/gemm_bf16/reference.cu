// The reference of gemm_bf16.cu: one output element per thread (a grid-stride loop over C, so any launch
// geometry covers it), the bf16 values widened exactly to double and the dot product accumulated in double
// in order k = 0, 1, ..., K-1.
__device__ double bf16_value(unsigned short h) {
  return (double)__uint_as_float((unsigned int)h << 16);  // a bf16 is the upper half of an f32
}

// The kernel's tensor maps (kernel.yaml's tmA, tmB: same signature), unused here.
struct __align__(64) gemm_reference_tensor_map {
  unsigned long long opaque[16];
};

extern "C" __global__ void gemm_bf16_reference(int M, int N, int K, const unsigned short* A,
                                               const unsigned short* B, float* C,
                                               const __grid_constant__ gemm_reference_tensor_map,
                                               const __grid_constant__ gemm_reference_tensor_map) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long o = first; o < (long long)M * N; o += stride) {
    const long long m = o / N, n = o % N;
    double s = 0.0;
    for (int k = 0; k < K; ++k) s += bf16_value(A[m * K + k]) * bf16_value(B[(long long)k * N + n]);
    C[o] = (float)s;
  }
}
