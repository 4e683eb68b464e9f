// out (n x m) = the transpose of in (m x n), both row-major. A block of TILE x 8 threads handles one
// TILE x TILE tile (input of the smem_tile tests).
#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void transpose(int m, int n, const float* in, float* out) {
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;  // the tile's origin in `in`
  //@kf smem_tile tile array=in rows=TILE cols=TILE
#define tile(r, c) ((r0 + (r)) < m && (c0 + (c)) < n ? in[(size_t)(r0 + (r)) * n + (c0 + (c))] : 0.0f)
  {
    for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
      const int orow = c0 + k, ocol = r0 + threadIdx.x;
      if (orow < n && ocol < m) out[(size_t)orow * m + ocol] = tile(threadIdx.x, k);
    }
  }
}
