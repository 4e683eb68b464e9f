// Sum of a large f32 vector into one value: *out += x[0] + x[1] + ... + x[n-1].
// `out` must hold 0 before the launch (the description fills it with 0); every block adds its partial
// sum to it atomically, so the order of the additions, and the last bits of the result, vary.
//
// Transform site (kernel.yaml): `vectorize items`, the per-thread loop with float2/float4 loads.
//
// Baseline: each thread loads one element, the block adds its elements with a tree in shared memory
// (halving the active threads each step), and thread 0 adds the block's sum to *out with atomicAdd.
// Tuning parameters (macros; the defaults are the baseline):
//   block_size        threads per block (a power of two)
//   items_per_thread  elements each thread adds up before the tree: the grid has that many times fewer
//                     blocks and each thread strides over the vector by the grid's size, so that a warp's
//                     loads stay contiguous (fewer blocks, fewer atomics)
//   warp_reduce       1: the tree stops at 32 partial sums and one warp finishes with shuffles
#ifndef block_size
#define block_size 256
#endif
#ifndef items_per_thread
#define items_per_thread 1
#endif
#ifndef warp_reduce
#define warp_reduce 0
#endif

extern "C" __global__ void reduce_sum(long long n, const float* x, float* out) {
  __shared__ float partial[block_size];
  // Each thread's own elements: a grid-stride loop (the grid is sized for items_per_thread elements per
  // thread). Every thread of the grid runs it, starting at 0, 1, ..., stride - 1: the vectorize
  // transform's base is 0.
  float sum = 0.0f;
  //@kf vectorize items index=i arrays=x base=0
  for (long long i = (long long)blockIdx.x * block_size + threadIdx.x; i < n; i += (long long)block_size * gridDim.x)
    sum += x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
#if warp_reduce
  // Down to 32 partial sums in shared memory, then warp 0 adds them with butterfly shuffles.
  for (int s = block_size / 2; s >= 32; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    float v = partial[threadIdx.x];
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0) atomicAdd(out, v);
  }
#else
  for (int s = block_size / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
#endif
}
