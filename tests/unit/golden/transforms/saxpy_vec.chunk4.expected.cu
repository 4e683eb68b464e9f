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
  {
    const unsigned long long kf_chunk_phase = (reinterpret_cast<unsigned long long>(y) / sizeof(float) + (unsigned long long)(begin)) % 4;
    const bool kf_chunk_ok = (reinterpret_cast<unsigned long long>(x) / sizeof(float) + (unsigned long long)(begin)) % 4 == kf_chunk_phase;
    const long long kf_chunk_a = (begin) + (long long)((4 - kf_chunk_phase) % 4);
    for (long long i = begin; i < end && (!kf_chunk_ok || i < kf_chunk_a); ++i)
      y[i] = a * x[i];
    if (kf_chunk_ok) {
      for (long long kf_chunk_i = kf_chunk_a; kf_chunk_i + 3 < end; kf_chunk_i += 4) {
        float4 kf_chunk_y;
        const float4 kf_chunk_x = *reinterpret_cast<const float4*>(x + kf_chunk_i);
        { kf_chunk_y.x = a * kf_chunk_x.x; }
        { kf_chunk_y.y = a * kf_chunk_x.y; }
        { kf_chunk_y.z = a * kf_chunk_x.z; }
        { kf_chunk_y.w = a * kf_chunk_x.w; }
        *reinterpret_cast<float4*>(y + kf_chunk_i) = kf_chunk_y;
      }
      const long long kf_chunk_tail = kf_chunk_a + (end > kf_chunk_a ? (long long)((end - kf_chunk_a) / 4 * 4) : (long long)0);
      for (long long i = kf_chunk_tail; i < end; ++i)
        y[i] = a * x[i];
    }
  }
}
