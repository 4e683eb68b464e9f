// y = a * x + y as a grid-stride loop, and y = a * x over per-thread chunks (inputs of the vectorize tests).
extern "C" __global__ void saxpy_gs(long long n, float a, const float* x, float* y) {
  //@kf vectorize gs base=0
  {
    const unsigned long long kf_gs_phase = (reinterpret_cast<unsigned long long>(y) / sizeof(float) + (unsigned long long)(0)) % 4;
    const bool kf_gs_ok = (reinterpret_cast<unsigned long long>(x) / sizeof(float) + (unsigned long long)(0)) % 4 == kf_gs_phase;
    const long long kf_gs_a = (0) + (long long)((4 - kf_gs_phase) % 4);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n && (!kf_gs_ok || i < kf_gs_a); i += (long long)blockDim.x * gridDim.x) {
      y[i] = a * x[i] + y[i];
    }
    if (kf_gs_ok) {
      for (long long kf_gs_i = kf_gs_a + 4 * (((long long)blockIdx.x * blockDim.x + threadIdx.x) - (0)); kf_gs_i + 3 < n; kf_gs_i += 4 * ((long long)blockDim.x * gridDim.x)) {
        float4 kf_gs_y = *reinterpret_cast<const float4*>(y + kf_gs_i);
        const float4 kf_gs_x = *reinterpret_cast<const float4*>(x + kf_gs_i);
        {
          kf_gs_y.x = a * kf_gs_x.x + kf_gs_y.x;
        }
        {
          kf_gs_y.y = a * kf_gs_x.y + kf_gs_y.y;
        }
        {
          kf_gs_y.z = a * kf_gs_x.z + kf_gs_y.z;
        }
        {
          kf_gs_y.w = a * kf_gs_x.w + kf_gs_y.w;
        }
        *reinterpret_cast<float4*>(y + kf_gs_i) = kf_gs_y;
      }
      const long long kf_gs_tail = kf_gs_a + (n > kf_gs_a ? (long long)((n - kf_gs_a) / 4 * 4) : (long long)0);
      for (long long i = kf_gs_tail + (((long long)blockIdx.x * blockDim.x + threadIdx.x) - (0)); i < n; i += (long long)blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
      }
    }
  }
}

extern "C" __global__ void scale_chunk(long long n, long long chunk, float a, const float* x, float* y) {
  const long long begin = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * chunk;
  const long long end = begin + chunk < n ? begin + chunk : n;
  //@kf vectorize chunk
  for (long long i = begin; i < end; ++i) y[i] = a * x[i];
}
