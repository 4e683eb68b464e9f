#define block_size_x 32
#define block_size_y 16
#define tile_x 4
#define tile_y 1
#define use_shared 1
#line 1 "conv2d.cu"
// 2D convolution (cross-correlation, as in deep learning) of a single-channel row-major [H x W] f32 image
// with an R x R f32 filter (R odd), zero padding, output the size of the input:
//   out[y][x] = sum_{i,j < R} filt[i][j] * in[y + i - R/2][x + j - R/2]   (pixels outside the image are 0)
// The filter is an ordinary buffer argument (not __constant__: the engine does not set module globals).
//
// Baseline: one thread per output pixel, a 32 x 8 block, every input pixel and filter tap read from
// global memory (the caches do the rest).
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x, block_size_y  threads per block along x (columns) and y (rows)
//   tile_x, tile_y              outputs per thread along x and y, strided by the block size
//   use_shared                  1: the block stages its input tile plus the R-1 halo in (dynamic) shared
//                               memory, sized by kernel.yaml's shared_memory expression, and the threads
//                               read their neighbourhoods from there
// Transform sites (kernel.yaml): `unroll filter_rows` and `unroll filter_cols`, the loops over the filter
// taps (R is a run-time argument, so the compiler cannot unroll them fully by itself).
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
#ifndef use_shared
#define use_shared 0
#endif

#define TILE_W (block_size_x * tile_x)  // output columns per block
#define TILE_H (block_size_y * tile_y)  // output rows per block

extern "C" __global__ void conv2d(int H, int W, int R, const float* __restrict__ in, const float* __restrict__ filt, float* __restrict__ out) {
  const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * TILE_H;
  const int h = R / 2;  // halo on each side
#if use_shared
  extern __shared__ float tile[];  // (TILE_H + R - 1) rows of (TILE_W + R - 1) pixels
  const int tw = TILE_W + R - 1, th = TILE_H + R - 1;
  for (int ly = threadIdx.y; ly < th; ly += block_size_y) {
    const int gy = y0 + ly - h;
    for (int lx = threadIdx.x; lx < tw; lx += block_size_x) {
      const int gx = x0 + lx - h;
      tile[ly * tw + lx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[(size_t)gy * W + gx] : 0.0f;
    }
  }
  __syncthreads();
#pragma unroll
  for (int ty = 0; ty < tile_y; ++ty) {
#pragma unroll
    for (int tx = 0; tx < tile_x; ++tx) {
      const int ly = threadIdx.y + ty * block_size_y, lx = threadIdx.x + tx * block_size_x;
      const int y = y0 + ly, x = x0 + lx;
      if (y < H && x < W) {
        float acc = 0.0f;
        //@kf unroll filter_rows
        for (int i = 0; i < R; ++i) {
          //@kf unroll filter_cols
          #pragma unroll 4
          for (int j = 0; j < R; ++j) acc += filt[i * R + j] * tile[(ly + i) * tw + lx + j];
        }
        out[(size_t)y * W + x] = acc;
      }
    }
  }
#else
#pragma unroll
  for (int ty = 0; ty < tile_y; ++ty) {
#pragma unroll
    for (int tx = 0; tx < tile_x; ++tx) {
      const int y = y0 + threadIdx.y + ty * block_size_y, x = x0 + threadIdx.x + tx * block_size_x;
      if (y < H && x < W) {
        float acc = 0.0f;
        //@kf unroll filter_rows
        for (int i = 0; i < R; ++i) {
          const int yy = y + i - h;
          if (yy < 0 || yy >= H) continue;
          //@kf unroll filter_cols
          #pragma unroll 4
          for (int j = 0; j < R; ++j) {
            const int xx = x + j - h;
            if (xx >= 0 && xx < W) acc += filt[i * R + j] * in[(size_t)yy * W + xx];
          }
        }
        out[(size_t)y * W + x] = acc;
      }
    }
  }
#endif
}
