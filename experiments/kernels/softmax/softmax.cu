// Row softmax of a row-major [rows x cols] f32 matrix, numerically stable:
//   y[r][c] = exp(x[r][c] - m_r) / sum_k exp(x[r][k] - m_r),  m_r = max_k x[r][k]
//
// Baseline: one block of block_size_x threads per row; three passes over the row in global memory (the
// maximum, the sum of exponentials, the outputs), each reduction a tree in shared memory.
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x  threads per row (a power of two)
//   block_size_y  rows per block (each row has its own block_size_x threads)
//   warp_reduce   1: reductions with warp shuffles, then one value per warp through shared memory
//   online        1: the maximum and the sum in one pass (the running sum is rescaled whenever the running
//                 maximum grows), so the row is read twice instead of three times
// Transform site (kernel.yaml): `vectorize row`, the row loops (max, sum, write; or stats, write) with float2/float4 loads and stores; every
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
#ifndef online
#define online 0
#endif

#define NEG_INF __int_as_float(0xff800000u)  // -infinity (NVRTC has no math.h here)

// Combines v over the block_size_x threads of this thread's row; every thread of the row gets the result.
// Called by every thread of the block (it synchronizes the block). `buf` is this row's block_size_x floats.
template <bool is_max>
__device__ float row_reduce(float v, float* buf) {
#if warp_reduce
  constexpr int width = block_size_x < 32 ? block_size_x : 32;  // lanes of one row within a warp
  for (int offset = width / 2; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if (block_size_x > 32) {
    constexpr int warps = block_size_x / 32;
    if (threadIdx.x % 32 == 0) buf[threadIdx.x / 32] = v;
    __syncthreads();
    v = buf[0];
    for (int w = 1; w < warps; ++w) v = is_max ? fmaxf(v, buf[w]) : v + buf[w];
    __syncthreads();  // everyone has read buf before it is reused
  }
  return v;
#else
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = block_size_x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = is_max ? fmaxf(buf[threadIdx.x], buf[threadIdx.x + s])
                                                   : buf[threadIdx.x] + buf[threadIdx.x + s];
    __syncthreads();
  }
  v = buf[0];
  __syncthreads();  // everyone has read buf[0] before it is reused
  return v;
#endif
}

extern "C" __global__ void softmax(int rows, int cols, const float* x, float* y) {
  __shared__ float red[block_size_y][block_size_x];
  const int row = blockIdx.x * block_size_y + threadIdx.y;
  // Threads past the last row work on the last row without writing: they still take part in the barriers.
  const int r = row < rows ? row : rows - 1;
  const float* xr = x + (size_t)r * cols;
  float* buf = red[threadIdx.y];
#if online
  float m = NEG_INF, s = 0.0f;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) {
    const float v = xr[c];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;  // expf(-inf) = 0 for the first element
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  const float row_max = row_reduce<true>(m, buf);
  const float row_sum = row_reduce<false>(s == 0.0f ? 0.0f : s * expf(m - row_max), buf);
#else
  float m = NEG_INF;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) m = fmaxf(m, xr[c]);
  const float row_max = row_reduce<true>(m, buf);
  float s = 0.0f;
  //@kf vectorize row index=c arrays=xr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) s += expf(xr[c] - row_max);
  const float row_sum = row_reduce<false>(s, buf);
#endif
  if (row >= rows) return;
  const float inv = 1.0f / row_sum;
  float* yr = y + (size_t)r * cols;
  //@kf vectorize row index=c arrays=xr,yr type=float base=0
  for (int c = threadIdx.x; c < cols; c += block_size_x) yr[c] = expf(xr[c] - row_max) * inv;
}
