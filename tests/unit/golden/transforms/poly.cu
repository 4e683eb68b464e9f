// y[i] = sum_d c[d] * x[i]^d (Horner) over 16 consecutive elements per thread: the kernel of the
// composition tests, with sites for coarsen, vectorize and unroll.
#ifndef block_size
#define block_size 256
#endif

extern "C" __global__ void __launch_bounds__(block_size) poly(long long n, int degree, const float* c, const float* x,
                                                                float* y) {
  //@kf coarsen body
  {
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 16;
    const long long last = first + 16 < n ? first + 16 : n;
    //@kf vectorize elems
    for (long long i = first; i < last; ++i) {
      const float v = x[i];
      float acc = 0.0f;
      //@kf unroll horner
      for (int d = degree; d >= 0; --d) acc = acc * v + c[d];
      y[i] = acc;
    }
  }
}
