// Transpose of a row-major [rows x cols] f32 matrix into a row-major [cols x rows] one:
//   out[c][r] = in[r][c]
//
// The block works on a tile of TILE_R input rows by TILE_C input columns, with its threads laid out along
// the OUTPUT: threadIdx.x runs along the output's rows (input rows r), threadIdx.y along the input's
// columns c, so that the writes of a warp are contiguous. Each thread handles tile_x x tile_y elements,
// strided by the block size.
// Baseline (the `smem_tile tile` transform at "direct"): every thread reads its input element straight
// from global memory (strided by `cols` across a warp) and writes it (coalesced); one element per thread,
// a 32 x 8 block.
// Transform site (kernel.yaml): `smem_tile tile` stages the block's input tile in shared memory first
// (the staging loop reads it row by row, coalesced), with 0, 1 or 2 padding columns against bank
// conflicts when the tile is then read column-wise; the accessor macro IN_TILE gives the value of any
// element of the tile (zero outside the matrix) and is the same in every thread.
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x, block_size_y  threads per block along the output's columns (input rows) and rows
//   tile_x, tile_y              elements per thread along the input's rows and columns
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef tile_x
#define tile_x 1
#endif
#ifndef tile_y
#define tile_y 1
#endif

#define TILE_R (block_size_x * tile_x)  // input rows per block
#define TILE_C (block_size_y * tile_y)  // input columns per block

extern "C" __global__ void transpose(int rows, int cols, const float* in, float* out) {
  const int r0 = blockIdx.x * TILE_R;  // the tile's first input row
  const int c0 = blockIdx.y * TILE_C;  // and first input column
  //@kf smem_tile tile array=in rows=TILE_R cols=TILE_C
#define IN_TILE(r, c) ((r0 + (r) < rows && c0 + (c) < cols) ? in[(size_t)(r0 + (r)) * cols + (c0 + (c))] : 0.0f)
  {
#pragma unroll
    for (int j = 0; j < tile_y; ++j) {
      const int lc = threadIdx.y + j * block_size_y;
#pragma unroll
      for (int i = 0; i < tile_x; ++i) {
        const int lr = threadIdx.x + i * block_size_x;
        if (r0 + lr < rows && c0 + lc < cols) out[(size_t)(c0 + lc) * rows + (r0 + lr)] = IN_TILE(lr, lc);
      }
    }
  }
}
