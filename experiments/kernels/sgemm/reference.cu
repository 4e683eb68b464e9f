// The reference of sgemm.cu: one output element per thread (a grid-stride loop over C, so any launch
// geometry covers it), the dot product accumulated in double precision in order k = 0, 1, ..., K-1.
extern "C" __global__ void sgemm_reference(int M, int N, int K, const float* A, const float* B, float* C) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long o = first; o < (long long)M * N; o += stride) {
    const long long m = o / N, n = o % N;
    double s = 0.0;
    for (int k = 0; k < K; ++k) s += (double)A[m * K + k] * (double)B[(long long)k * N + n];
    C[o] = (float)s;
  }
}
