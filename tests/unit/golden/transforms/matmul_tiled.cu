// C = A * B for n x n row-major matrices; TILE x TILE threads per block, one output each, K in tiles staged
// in shared memory (input of the pipeline tests).
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void matmul(int n, const float* A, const float* B, float* C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  //@kf pipeline k_tiles buffers=As,Bs
  for (int t = 0; t < (n + TILE - 1) / TILE; ++t) {
    As[ty][tx] = (row < n && t * TILE + tx < n) ? A[(size_t)row * n + t * TILE + tx] : 0.0f;
    Bs[ty][tx] = (t * TILE + ty < n && col < n) ? B[(size_t)(t * TILE + ty) * n + col] : 0.0f;
    __syncthreads();
    //@kf unroll k_inner
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < n && col < n) C[(size_t)row * n + col] = acc;
}
