#define block_size_x 16
#define block_size_y 8
#define tile_x 4
#define tile_y 8
#define use_shared 1
#define impl rows
#define FILTER_R 15
#line 1 "conv2d.cu"
// 2D convolution (cross-correlation, as in deep learning) of a single-channel row-major [H x W] f32 image
// with an R x R f32 filter (R odd), zero padding, output the size of the input:
//   out[y][x] = sum_{i,j < R} filt[i][j] * in[y + i - R/2][x + j - R/2]   (pixels outside the image are 0)
// The filter is an ordinary buffer argument.
//
// Baseline: one thread per output pixel, a 32 x 8 block, every input pixel and filter tap read from
// global memory (the caches do the rest).
// Tuning parameters (macros; the defaults are the baseline):
//   block_size_x, block_size_y  threads per block along x (columns) and y (rows)
//   tile_x, tile_y              outputs per thread along x and y: strided by the block size (direct path),
//                               contiguous (register-row path)
//   use_shared                  1: the block stages its input tile plus the R-1 halo in (dynamic) shared
//                               memory, sized by kernel.yaml's shared_memory expression, and the threads
//                               read their neighbourhoods from there
//   FILTER_R                    (kernel.yaml's defines: the time shape's R on the register-row path, else
//                               0) when R == FILTER_R at run time, the register-row path below runs, with
//                               the filter size a compile-time constant; any other R takes the direct path
// Register-row path (impl rows in kernel.yaml): the block stages its tile (rows padded to a multiple of 4
// floats) and the filter (rows padded likewise) in shared memory; each thread owns tile_y x tile_x
// contiguous outputs and walks the tile_y + R - 1 input rows they need once, each row's tile_x + R - 1
// values loaded into registers as float4s, every filter row as broadcast float4s, so that every input
// value loaded feeds up to tile_x * R multiply-adds (the direct path: one load per multiply-add).
// Transform sites (kernel.yaml): `unroll filter_rows` and `unroll filter_cols`, the direct path's loops
// over the filter taps (R is a run-time argument there, so the compiler cannot unroll them fully).
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
#ifndef FILTER_R
#define FILTER_R 0
#endif

#define TILE_W (block_size_x * tile_x)  // output columns per block
#define TILE_H (block_size_y * tile_y)  // output rows per block

extern "C" __global__ void conv2d(int H, int W, int R, const float* __restrict__ in, const float* __restrict__ filt, float* __restrict__ out) {
  const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * TILE_H;
  const int h = R / 2;  // halo on each side
#if FILTER_R > 0
  if (R == FILTER_R) {  // uniform over the grid: every thread of a block takes the same branch
    // Shared memory: (TILE_H + R - 1) rows of RW floats (the tile and its halo, zero outside the image and
    // in the padding), then R filter rows of RP floats (zero past R). Both strides are multiples of 4, and
    // so is every thread's first column (tile_x % 4 == 0, kernel.yaml), so the float4 reads are aligned.
    constexpr int RW = (TILE_W + FILTER_R - 1 + 3) / 4 * 4;
    constexpr int RP = (FILTER_R + 3) / 4 * 4;
    constexpr int SEG = (tile_x + FILTER_R - 1 + 3) / 4;  // float4s of one thread's row segment
    extern __shared__ float4 smem4[];
    float* tile = reinterpret_cast<float*>(smem4);
    float* fs = tile + (TILE_H + FILTER_R - 1) * RW;
    for (int ly = threadIdx.y; ly < TILE_H + FILTER_R - 1; ly += block_size_y) {
      const int gy = y0 + ly - h;
      for (int lx = threadIdx.x; lx < RW; lx += block_size_x) {
        const int gx = x0 + lx - h;
        tile[ly * RW + lx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[(size_t)gy * W + gx] : 0.0f;
      }
    }
    for (int e = threadIdx.y * block_size_x + threadIdx.x; e < FILTER_R * RP; e += block_size_x * block_size_y) {
      const int fi = e / RP, fj = e % RP;
      fs[e] = fj < FILTER_R ? filt[fi * FILTER_R + fj] : 0.0f;
    }
    __syncthreads();
    const int lx0 = threadIdx.x * tile_x, ly0 = threadIdx.y * tile_y;
    float acc[tile_y][tile_x];
#pragma unroll
    for (int ty = 0; ty < tile_y; ++ty)
#pragma unroll
      for (int tx = 0; tx < tile_x; ++tx) acc[ty][tx] = 0.0f;
    // Input row r of the thread's window feeds output row ty through filter row r - ty.
#pragma unroll
    for (int r = 0; r < tile_y + FILTER_R - 1; ++r) {
      float row[SEG * 4];
      const float4* src = reinterpret_cast<const float4*>(tile + (ly0 + r) * RW + lx0);
#pragma unroll
      for (int q = 0; q < SEG; ++q) {
        const float4 v = src[q];
        row[4 * q] = v.x;
        row[4 * q + 1] = v.y;
        row[4 * q + 2] = v.z;
        row[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int ty = 0; ty < tile_y; ++ty) {
        const int fi = r - ty;
        if (fi < 0 || fi >= FILTER_R) continue;  // decided at compile time
        const float4* frow = reinterpret_cast<const float4*>(fs + fi * RP);
#pragma unroll
        for (int q = 0; q < RP / 4; ++q) {
          const float4 f4 = frow[q];
          const float f[4] = {f4.x, f4.y, f4.z, f4.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (4 * q + e >= FILTER_R) continue;
#pragma unroll
            for (int tx = 0; tx < tile_x; ++tx) acc[ty][tx] += f[e] * row[tx + 4 * q + e];
          }
        }
      }
    }
    // Stores: float4 where the row's tile_x outputs are inside the image and 16-byte aligned (W % 4 == 0).
    const bool vec = W % 4 == 0 && x0 + lx0 + tile_x <= W;
#pragma unroll
    for (int ty = 0; ty < tile_y; ++ty) {
      const int y = y0 + ly0 + ty;
      if (y >= H) continue;
      float* o = out + (size_t)y * W + x0 + lx0;
      if (vec) {
#pragma unroll
        for (int q = 0; q < tile_x / 4; ++q)
          reinterpret_cast<float4*>(o)[q] =
              make_float4(acc[ty][4 * q], acc[ty][4 * q + 1], acc[ty][4 * q + 2], acc[ty][4 * q + 3]);
      } else {
#pragma unroll
        for (int tx = 0; tx < tile_x; ++tx)
          if (x0 + lx0 + tx < W) o[tx] = acc[ty][tx];
      }
    }
    return;
  }
#endif
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
