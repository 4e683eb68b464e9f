// The reference of softmax.cu: one thread per row (a grid-stride loop over the rows, so any launch
// geometry covers the matrix), three plain passes in double precision: the maximum, the sum of
// exponentials, the outputs.
extern "C" __global__ void softmax_reference(int rows, int cols, const float* x, float* y) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long r = first; r < rows; r += stride) {
    const float* xr = x + r * cols;
    double m = xr[0];
    for (int c = 1; c < cols; ++c) m = fmax(m, (double)xr[c]);
    double s = 0.0;
    for (int c = 0; c < cols; ++c) s += exp((double)xr[c] - m);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = (float)(exp((double)xr[c] - m) / s);
  }
}
