// The reference of heat2d.cu: one cell per thread (a grid-stride loop over the grid, so any launch
// geometry covers it), the clamped neighbours read straight from memory, the update in double precision.
extern "C" __global__ void heat2d_reference(int nx, int ny, float cap, float rx, float ry, float rz, float amb,
                                            const float* temp, const float* power, float* out) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long i = first; i < (long long)nx * ny; i += stride) {
    const long long y = i / nx, x = i % nx;
    const long long yn = y > 0 ? y - 1 : 0, ys = y < ny - 1 ? y + 1 : ny - 1;
    const long long xw = x > 0 ? x - 1 : 0, xe = x < nx - 1 ? x + 1 : nx - 1;
    const double t = temp[i];
    const double d = (double)power[i] + (double)ry * ((double)temp[yn * nx + x] + (double)temp[ys * nx + x] - 2.0 * t) +
                     (double)rx * ((double)temp[y * nx + xw] + (double)temp[y * nx + xe] - 2.0 * t) +
                     (double)rz * ((double)amb - t);
    out[i] = (float)(t + (double)cap * d);
  }
}
