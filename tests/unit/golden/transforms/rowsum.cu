// Row sums of an m x n row-major matrix, one thread per row (input of the unroll tests).
extern "C" __global__ void rowsum(int m, int n, const float* a, float* out) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float acc = 0.0f;
  //@kf unroll cols
  for (int j = 0; j < n; ++j) {
    acc += a[(size_t)row * n + j];
  }
  out[row] = acc;
}
