// The reference of conv2d.cu: one output pixel per thread (a grid-stride loop over the image, so any launch
// geometry covers it), the R*R products accumulated in double precision.
extern "C" __global__ void conv2d_reference(int H, int W, int R, const float* in, const float* filt, float* out) {
  const long long threads_per_block = (long long)blockDim.x * blockDim.y * blockDim.z;
  const long long block = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const long long first = block * threads_per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const long long stride = threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  for (long long o = first; o < (long long)H * W; o += stride) {
    const int y = (int)(o / W), x = (int)(o % W);
    double acc = 0.0;
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < R; ++j) {
        const int yy = y + i - R / 2, xx = x + j - R / 2;
        if (yy >= 0 && yy < H && xx >= 0 && xx < W) acc += (double)filt[i * R + j] * (double)in[(long long)yy * W + xx];
      }
    out[o] = (float)acc;
  }
}
