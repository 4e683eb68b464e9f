// Fused bias + GELU over a row-major [rows x cols] f32 matrix, the bias broadcast along the rows (one
// value per column):
//   y[r][c] = gelu(x[r][c] + bias[c]),  gelu(v) = v * Phi(v) = 0.5 v erfc(-v / sqrt(2))
// the exact (erf) GELU, written with erfc so that large negative v keeps its relative accuracy.
//
// Baseline: one thread per element: a block of block_size_x threads along a row, one row per block row,
// grid-stride loops over rows and columns (each runs once at the baseline's grid).
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x     threads per block along the columns
//   block_size_y     threads per block across rows
//   cols_per_thread  the grid has that many times fewer blocks along x: each thread handles that many
//                    columns (grid-stride, so a warp's accesses stay contiguous)
//   rows_per_thread  the same across rows
// Transform site (kernel.yaml): `vectorize cols`, the column loop with float2/float4 loads and stores.
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef block_size_y
#define block_size_y 1
#endif
#ifndef cols_per_thread
#define cols_per_thread 1
#endif
#ifndef rows_per_thread
#define rows_per_thread 1
#endif

__device__ float gelu(float v) {
  return 0.5f * v * erfcf(-0.70710678118654752f * v);
}

extern "C" __global__ void bias_gelu(int rows, int cols, const float* x, const float* bias, float* y) {
  for (int r = blockIdx.y * block_size_y + threadIdx.y; r < rows; r += block_size_y * gridDim.y) {
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    // The threads of one row start at 0, 1, ..., stride - 1: the vectorize transform's base is 0.
    //@kf vectorize cols index=c arrays=xr,yr,bias type=float base=0
    for (int c = blockIdx.x * block_size_x + threadIdx.x; c < cols; c += block_size_x * gridDim.x)
      yr[c] = gelu(xr[c] + bias[c]);
  }
}
