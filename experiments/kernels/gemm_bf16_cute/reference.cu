// The reference of gemm_bf16_cute.cu (same signature, the bf16 values as their 16-bit patterns): one
// output element per thread in a grid-stride loop (any launch geometry covers C), the bf16 values widened
// exactly to double and summed in double in order k = 0, 1, ..., K-1.
__device__ double bf16_value(unsigned short h) {
  return (double)__uint_as_float((unsigned int)h << 16);  // a bf16 is the upper half of an f32
}

extern "C" __global__ void gemm_bf16_cute_reference(int M, int N, int K, const unsigned short* A,
                                                    const unsigned short* B, float* C) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first =
      block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long o = first; o < (long long)M * N; o += stride) {
    const long long m = o / N, n = o % N;
    double s = 0.0;
    for (int k = 0; k < K; ++k) s += bf16_value(A[m * K + k]) * bf16_value(B[(long long)k * N + n]);
    C[o] = (float)s;
  }
}
