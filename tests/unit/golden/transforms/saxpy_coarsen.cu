// y = a * x + y, one element per thread (input of the coarsen tests).
extern "C" __global__ void saxpy(long long n, float a, const float* x, float* y) {
  //@kf coarsen body
  {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
  }
}
