// One explicit step of a HotSpot-like thermal simulation on an [ny x nx] grid (row-major f32): each cell's
// temperature moves towards its four neighbours', gains its power input and leaks towards the ambient
// temperature:
//   out = t + cap * (power + ry (t_north + t_south - 2t) + rx (t_west + t_east - 2t) + rz (amb - t))
// Indices past an edge are clamped to it (the boundary cells see themselves as neighbours).
//
// Baseline: one thread per cell, a 32 x 8 block, every neighbour read from global memory.
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x, block_size_y  threads per block along x and y
//   tile_x, tile_y              cells per thread along x and y, strided by the block size
// Transform site (kernel.yaml): `smem_tile halo` stages the block's temperature tile plus a one-cell halo
// ((TILE_H + 2) x (TILE_W + 2) values) in shared memory, with optional padding columns; the accessor macro
// TEMP(r, c) reads tile cell (r, c) with the clamping folded in, the same value in every thread.
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

#define TILE_W (block_size_x * tile_x)  // cells per block along x
#define TILE_H (block_size_y * tile_y)  // cells per block along y

extern "C" __global__ void heat2d(int nx, int ny, float cap, float rx, float ry, float rz, float amb,
                                  const float* temp, const float* power, float* out) {
  const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * TILE_H;
  // Tile cell (r, c) is grid cell (y0 + r - 1, x0 + c - 1), clamped to the grid.
  //@kf smem_tile halo array=temp rows=TILE_H+2 cols=TILE_W+2
#define TEMP(r, c) temp[(size_t)min(max(y0 + (r) - 1, 0), ny - 1) * nx + min(max(x0 + (c) - 1, 0), nx - 1)]
  {
#pragma unroll
    for (int ty = 0; ty < tile_y; ++ty) {
#pragma unroll
      for (int tx = 0; tx < tile_x; ++tx) {
        const int ly = threadIdx.y + ty * block_size_y, lx = threadIdx.x + tx * block_size_x;
        const int y = y0 + ly, x = x0 + lx;
        if (y < ny && x < nx) {
          const float t = TEMP(ly + 1, lx + 1);
          const size_t i = (size_t)y * nx + x;
          out[i] = t + cap * (power[i] + ry * (TEMP(ly, lx + 1) + TEMP(ly + 2, lx + 1) - 2.0f * t) +
                              rx * (TEMP(ly + 1, lx) + TEMP(ly + 1, lx + 2) - 2.0f * t) + rz * (amb - t));
        }
      }
    }
  }
}
