// The reference of reduce_sum.cu, in double precision, for any launch geometry:
//  1. every thread adds the elements i = its global index, + the number of threads, ... (a grid-stride
//     loop) in double;
//  2. thread 0 of each block adds its block's per-thread sums in order, and adds that to a double
//     accumulator in global memory;
//  3. the last block to finish (counted with an atomic counter) converts the total to float, writes it
//     to *out, and resets the accumulator and the counter for the next launch.
// Rounding: one conversion to float at the end; the double additions are exact to ~1e-16 relative.
__device__ double reference_total;             // zero when the module is loaded, reset by the last block
__device__ unsigned int reference_blocks_done;

extern "C" __global__ void reduce_sum_reference(long long n, const float* x, float* out) {
  __shared__ double per_thread[1024];
  const unsigned int threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
  const unsigned int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long stride = (long long)threads_per_block * blocks;
  double s = 0.0;
  for (long long i = (long long)b * threads_per_block + t; i < n; i += stride) s += (double)x[i];
  per_thread[t] = s;
  __syncthreads();
  if (t == 0) {
    double block_sum = 0.0;
    for (unsigned int k = 0; k < threads_per_block; ++k) block_sum += per_thread[k];
    atomicAdd(&reference_total, block_sum);
    __threadfence();  // the addition is visible before this block counts as done
    if (atomicAdd(&reference_blocks_done, 1u) == blocks - 1) {
      __threadfence();
      const double total = atomicAdd(&reference_total, 0.0);  // read through the atomic unit: every block's sum
      *out = (float)total;
      reference_total = 0.0;
      reference_blocks_done = 0;
    }
  }
}
