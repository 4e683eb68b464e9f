// Planted faults for scripts/device-test: each value of PLANT is a variant that must come back with a
// known status. 0 is correct.
//   1 writes far out of bounds (illegal address: crashed)
//   2 never terminates (timeout)
//   3 asks for more dynamic shared memory than an SM has (invalid or launch_failed; see kernel.yaml)
//   4 computes a wrong value at one element (wrong_result)
//   5 leaves one element unwritten (wrong_result: outputs are poisoned)
#ifndef PLANT
#define PLANT 0
#endif

extern "C" __global__ void planted(long long n, const float* __restrict__ x, float* __restrict__ y) {
  extern __shared__ float scratch[];
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#if PLANT == 1
  if (i < n) y[i + (1LL << 40)] = 2.0f * x[i];
#elif PLANT == 2
  volatile const float* vx = x;
  while (vx[0] == vx[0] || vx[0] != vx[0]) {
  }
  if (i < n) y[i] = 2.0f * x[i];
#elif PLANT == 3
  scratch[threadIdx.x] = x[i < n ? i : 0];
  __syncthreads();
  if (i < n) y[i] = 2.0f * scratch[threadIdx.x];
#elif PLANT == 4
  if (i < n) y[i] = 2.0f * x[i] + (i == n / 2 ? 1.0f : 0.0f);
#elif PLANT == 5
  if (i < n && i != 7) y[i] = 2.0f * x[i];
#else
  if (i < n) y[i] = 2.0f * x[i];
#endif
}
