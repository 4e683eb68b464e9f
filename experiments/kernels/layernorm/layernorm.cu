// Row layer normalization of a row-major [rows x cols] f32 matrix with a per-column scale and shift:
//   y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c]
// mean_r and var_r the mean and the (biased) variance of row r; eps = 1e-5 (an argument).
//
// Baseline: one block of block_size_x threads per row; three passes over the row in global memory (the
// mean, the variance around it, the outputs), each reduction a tree in shared memory.
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x  threads per row (a power of two)
//   block_size_y  rows per block (each row has its own block_size_x threads)
//   warp_reduce   1: reductions with warp shuffles, then one value per warp through shared memory
//   one_pass      1: the sum and the sum of squares in one pass, so the row is read twice instead of three
//                 times: var = E[d^2] - E[d]^2 with d = x - x[r][0] (shifted by the row's first element, so
//                 that a mean far from zero does not cancel the variance away)
// Transform site (kernel.yaml): `vectorize row`, the row loops (mean, variance, write; or stats, write) with float2/float4 loads and stores; every
// loop is run by the block_size_x threads of a row, starting at 0, 1, ..., block_size_x - 1 (base 0).
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef block_size_y
#define block_size_y 1
#endif
#ifndef warp_reduce
#define warp_reduce 0
#endif
#ifndef one_pass
#define one_pass 0
#endif

// Sum of v over the block_size_x threads of this thread's row; every thread of the row gets the result.
// Called by every thread of the block (it synchronizes the block). `buf` is this row's block_size_x floats.
__device__ float row_sum(float v, float* buf) {
#if warp_reduce
  constexpr int width = block_size_x < 32 ? block_size_x : 32;  // lanes of one row within a warp
  for (int offset = width / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (block_size_x > 32) {
    constexpr int warps = block_size_x / 32;
    if (threadIdx.x % 32 == 0) buf[threadIdx.x / 32] = v;
    __syncthreads();
    v = buf[0];
    for (int w = 1; w < warps; ++w) v += buf[w];
    __syncthreads();  // everyone has read buf before it is reused
  }
  return v;
#else
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = block_size_x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  v = buf[0];
  __syncthreads();  // everyone has read buf[0] before it is reused
  return v;
#endif
}

extern "C" __global__ void layernorm(int rows, int cols, float eps, const float* x, const float* gamma,
                                     const float* beta, float* y) {
  __shared__ float red[block_size_y][block_size_x];
  const int row = blockIdx.x * block_size_y + threadIdx.y;
  // Threads past the last row work on the last row without writing: they still take part in the barriers.
  const int r = row < rows ? row : rows - 1;
  const float* xr = x + (size_t)r * cols;
  float* buf = red[threadIdx.y];
#if one_pass
  const float shift = xr[0];
  float s = 0.0f, sq = 0.0f;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) {
    const float d = xr[c] - shift;
    s += d;
    sq += d * d;
  }
  const float mean_d = row_sum(s, buf) / cols;
  const float mean = shift + mean_d;
  const float var = fmaxf(row_sum(sq, buf) / cols - mean_d * mean_d, 0.0f);
#else
  float s = 0.0f;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) s += xr[c];
  const float mean = row_sum(s, buf) / cols;
  float sq = 0.0f;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) {
    const float d = xr[c] - mean;
    sq += d * d;
  }
  const float var = row_sum(sq, buf) / cols;
#endif
  if (row >= rows) return;
  const float rstd = rsqrtf(var + eps);
  float* yr = y + (size_t)r * cols;
  //@kf vectorize row index=c arrays=xr,yr,gamma,beta type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
