// The reference of attention.cu: one thread per query row (a grid-stride loop over the bh * seq rows, so
// any launch geometry covers them), a plain two-pass softmax in double precision: first the maximum score,
// then the exponentials, their sum and the weighted sum of the value rows.
#define HEAD_DIM 64

__device__ double score(const float* q, const float* k, double scale) {
  double s = 0.0;
  for (int c = 0; c < HEAD_DIM; ++c) s += (double)q[c] * (double)k[c];
  return s * scale;
}

extern "C" __global__ void attention_reference(int bh, int seq, int causal, float scale, const float* Q,
                                               const float* K, const float* V, float* O) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long row = first; row < (long long)bh * seq; row += stride) {
    const long long b = row / seq, i = row % seq;
    const float* q = Q + row * HEAD_DIM;
    const float* k = K + b * seq * HEAD_DIM;
    const float* v = V + b * seq * HEAD_DIM;
    const long long keys = causal ? i + 1 : seq;
    double m = -1e300;
    for (long long j = 0; j < keys; ++j) m = fmax(m, score(q, k + j * HEAD_DIM, scale));
    double acc[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; ++c) acc[c] = 0.0;
    double l = 0.0;
    for (long long j = 0; j < keys; ++j) {
      const double p = exp(score(q, k + j * HEAD_DIM, scale) - m);
      l += p;
      for (int c = 0; c < HEAD_DIM; ++c) acc[c] += p * (double)v[j * HEAD_DIM + c];
    }
    for (int c = 0; c < HEAD_DIM; ++c) O[row * HEAD_DIM + c] = (float)(acc[c] / l);
  }
}
