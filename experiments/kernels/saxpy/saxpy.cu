// y = a * x + y over n floats. Each thread handles items_per_thread elements strided by the block size,
// so that a warp's accesses stay contiguous.
#ifndef block_size
#define block_size 256
#endif
#ifndef items_per_thread
#define items_per_thread 1
#endif

// Transform site (kernel.yaml): `coarsen body` repeats the braced block so that each thread does the work
// of several blocks' threads (the grid shrinks accordingly).
extern "C" __global__ void __launch_bounds__(block_size)
saxpy(long long n, float a, const float* __restrict__ x, float* __restrict__ y) {
  //@kf coarsen body
  {
    const long long base = (long long)blockIdx.x * (block_size * items_per_thread) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < items_per_thread; ++k) {
      const long long i = base + (long long)k * block_size;
      if (i < n) y[i] = a * x[i] + y[i];
    }
  }
}

// The reference: one element per thread, nothing else.
extern "C" __global__ void saxpy_reference(long long n, float a, const float* x, float* y) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// A device-to-device copy with saxpy's access pattern and parameters: the bandwidth yardstick of
// scripts/device-test (copy.yaml).
extern "C" __global__ void __launch_bounds__(block_size)
copy(long long n, float a, const float* __restrict__ x, float* __restrict__ y) {
  const long long base = (long long)blockIdx.x * (block_size * items_per_thread) + threadIdx.x;
#pragma unroll
  for (int k = 0; k < items_per_thread; ++k) {
    const long long i = base + (long long)k * block_size;
    if (i < n) y[i] = x[i] + 0.0f * a;
  }
}
