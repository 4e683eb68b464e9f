// y = a * x + y as a grid-stride loop, and y = a * x over per-thread chunks (inputs of the vectorize tests).
extern "C" __global__ void saxpy_gs(long long n, float a, const float* x, float* y) {
  //@kf vectorize gs base=0
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

extern "C" __global__ void scale_chunk(long long n, long long chunk, float a, const float* x, float* y) {
  const long long begin = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * chunk;
  const long long end = begin + chunk < n ? begin + chunk : n;
  //@kf vectorize chunk
  for (long long i = begin; i < end; ++i) y[i] = a * x[i];
}
