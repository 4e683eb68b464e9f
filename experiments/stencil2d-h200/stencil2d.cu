// 2D 5-point stencil (one Jacobi step of the heat equation) with clamped boundaries:
//   out[y][x] = c0 * in[y][x] + c1 * (in[y-1][x] + in[y+1][x] + in[y][x-1] + in[y][x+1])
// where an index outside [0, n) is clamped to the nearest edge. Every output element is written.
//
// Tuning parameters (injected as macros):
//   block_size_x, block_size_y  threads per block in x and y
//   tile_size_x, tile_size_y    outputs per thread in x and y (strided by the block size, so that
//                               neighbouring threads touch neighbouring addresses)
//   use_shared                  1: stage the block's input tile plus a one-cell halo in shared memory
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif
#ifndef use_shared
#define use_shared 0
#endif

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
stencil2d(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, float c0, float c1) {
  const int x0 = blockIdx.x * (block_size_x * tile_size_x);
  const int y0 = blockIdx.y * (block_size_y * tile_size_y);
#if use_shared
  constexpr int tw = block_size_x * tile_size_x + 2;
  constexpr int th = block_size_y * tile_size_y + 2;
  __shared__ float tile[th][tw];
  for (int ly = threadIdx.y; ly < th; ly += block_size_y) {
    const int gy = min(max(y0 + ly - 1, 0), ny - 1);
    for (int lx = threadIdx.x; lx < tw; lx += block_size_x) {
      const int gx = min(max(x0 + lx - 1, 0), nx - 1);
      tile[ly][lx] = in[(size_t)gy * nx + gx];
    }
  }
  __syncthreads();
#pragma unroll
  for (int ty = 0; ty < tile_size_y; ++ty) {
#pragma unroll
    for (int tx = 0; tx < tile_size_x; ++tx) {
      const int lx = threadIdx.x + tx * block_size_x + 1;
      const int ly = threadIdx.y + ty * block_size_y + 1;
      const int gx = x0 + lx - 1, gy = y0 + ly - 1;
      if (gx < nx && gy < ny) {
        out[(size_t)gy * nx + gx] =
            c0 * tile[ly][lx] + c1 * (tile[ly - 1][lx] + tile[ly + 1][lx] + tile[ly][lx - 1] + tile[ly][lx + 1]);
      }
    }
  }
#else
#pragma unroll
  for (int ty = 0; ty < tile_size_y; ++ty) {
#pragma unroll
    for (int tx = 0; tx < tile_size_x; ++tx) {
      const int gx = x0 + tx * block_size_x + threadIdx.x;
      const int gy = y0 + ty * block_size_y + threadIdx.y;
      if (gx < nx && gy < ny) {
        const int xm = max(gx - 1, 0), xp = min(gx + 1, nx - 1);
        const int ym = max(gy - 1, 0), yp = min(gy + 1, ny - 1);
        const size_t row = (size_t)gy * nx;
        out[row + gx] = c0 * in[row + gx] +
                        c1 * (in[(size_t)ym * nx + gx] + in[(size_t)yp * nx + gx] + in[row + xm] + in[row + xp]);
      }
    }
  }
#endif
}
