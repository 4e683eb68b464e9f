// The reference of transpose.cu: one output element per thread (a grid-stride loop over the output, so any
// launch geometry covers it), out[c][r] = in[r][c].
extern "C" __global__ void transpose_reference(int rows, int cols, const float* in, float* out) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long o = first; o < (long long)rows * cols; o += stride) {
    const long long c = o / rows, r = o % rows;  // out is [cols x rows]
    out[o] = in[r * cols + c];
  }
}
