// The reference of layernorm.cu: one thread per row (a grid-stride loop over the rows, so any launch
// geometry covers the matrix), in double precision: the mean, then the variance around it, then the outputs.
extern "C" __global__ void layernorm_reference(int rows, int cols, float eps, const float* x, const float* gamma,
                                               const float* beta, float* y) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long r = first; r < rows; r += stride) {
    const float* xr = x + r * cols;
    double mean = 0.0;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    double var = 0.0;
    for (int c = 0; c < cols; ++c) var += ((double)xr[c] - mean) * ((double)xr[c] - mean);
    var /= cols;
    const double inv_std = 1.0 / sqrt(var + (double)eps);
    for (int c = 0; c < cols; ++c)
      y[r * cols + c] = (float)(((double)xr[c] - mean) * inv_std * (double)gamma[c] + (double)beta[c]);
  }
}
