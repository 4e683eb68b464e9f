// The reference of bias_gelu.cu: one output per thread (a grid-stride loop, so any launch geometry covers
// the matrix), the GELU evaluated in double precision (erfc: no cancellation for large negative v).
extern "C" __global__ void bias_gelu_reference(int rows, int cols, const float* x, const float* bias, float* y) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  const long long n = (long long)rows * cols;
  for (long long i = first; i < n; i += stride) {
    const double v = (double)x[i] + (double)bias[i % cols];
    y[i] = (float)(0.5 * v * erfc(-v / sqrt(2.0)));
  }
}
