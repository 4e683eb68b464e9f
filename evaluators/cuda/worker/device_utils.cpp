#include "evaluators/cuda/worker/device_utils.hpp"

#include <cmath>
#include <cstring>

#include "kforge/error.hpp"

namespace kf::cuda {

namespace {
const char* type_names[12] = {"f32", "f64", "f16", "bf16", "i8",  "u8",
                              "i16", "u16", "i32", "u32",  "i64", "u64"};
}

const std::string& device_utils_source() {
  static const std::string src = R"CUDA(
typedef unsigned long long u64;
typedef long long i64;

__device__ __forceinline__ u64 kf_mix(u64 z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
__device__ __forceinline__ double kf_unit(u64 z) { return (double)(z >> 11) * (1.0 / 9007199254740992.0); }

// kind: 0 normal(a, b), 1 uniform[a, b), 2 iota(a + b i), 3 constant a
__device__ __forceinline__ double kf_value(u64 i, int kind, double a, double b, u64 seed) {
  if (kind == 2) return a + b * (double)i;
  if (kind == 3) return a;
  const u64 h = kf_mix(seed ^ kf_mix(i));
  if (kind == 1) return a + (b - a) * kf_unit(h);
  double u1 = kf_unit(h);
  const double u2 = kf_unit(kf_mix(h ^ 0x5851f42d4c957f2dULL));
  if (u1 < 1e-300) u1 = 1e-300;
  return a + b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
}

__device__ __forceinline__ unsigned short kf_f32_to_f16(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float kf_f16_to_f32(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short kf_f32_to_bf16(float f) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float kf_bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }

#define KF_FILL(NAME, T, CONVERT)                                                                     \
  extern "C" __global__ void kf_fill_##NAME(T* p, u64 n, int kind, double a, double b, u64 seed) {  \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) { \
      const double v = kf_value(i, kind, a, b, seed);                                                  \
      p[i] = CONVERT;                                                                                   \
    }                                                                                                   \
  }
KF_FILL(f32, float, (float)v)
KF_FILL(f64, double, v)
KF_FILL(f16, unsigned short, kf_f32_to_f16((float)v))
KF_FILL(bf16, unsigned short, kf_f32_to_bf16((float)v))
KF_FILL(i8, signed char, (signed char)llrint(v))
KF_FILL(u8, unsigned char, (unsigned char)llrint(fabs(v)))
KF_FILL(i16, short, (short)llrint(v))
KF_FILL(u16, unsigned short, (unsigned short)llrint(fabs(v)))
KF_FILL(i32, int, (int)llrint(v))
KF_FILL(u32, unsigned, (unsigned)llrint(fabs(v)))
KF_FILL(i64, i64, (i64)llrint(v))
KF_FILL(u64, u64, (u64)llrint(fabs(v)))

// stats: [0] bad, [1] nan/inf, [2] first bad index (atomicMin), [3] max |error| as ordered double bits
__device__ __forceinline__ void kf_account(u64 i, double o, double r, double rel, double abs_tol, u64* stats) {
  const bool r_finite = isfinite(r);
  const bool o_finite = isfinite(o);
  bool bad;
  if (!o_finite || !r_finite) {
    bad = !(o == r);  // equal infinities pass; any NaN fails
    if (!o_finite && r_finite) atomicAdd(&stats[1], 1ULL);
  } else {
    const double err = fabs(o - r);
    bad = !(err <= abs_tol + rel * fabs(r));
    atomicMax(&stats[3], (u64)__double_as_longlong(err));  // non-negative doubles order as their bits
  }
  if (bad) {
    atomicAdd(&stats[0], 1ULL);
    atomicMin(&stats[2], i);
  }
}

#define KF_COMPARE(NAME, T, TO_DOUBLE)                                                                        \
  extern "C" __global__ void kf_compare_##NAME(const T* out, const T* ref, u64 n, double rel, double abs_tol, \
                                                u64* stats) {                                                 \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {       \
      const T ov = out[i], rv = ref[i];                                                                       \
      kf_account(i, TO_DOUBLE(ov), TO_DOUBLE(rv), rel, abs_tol, stats);                                       \
    }                                                                                                         \
  }
#define KF_ID(x) ((double)(x))
#define KF_H(x) ((double)kf_f16_to_f32(x))
#define KF_B(x) ((double)kf_bf16_to_f32(x))
KF_COMPARE(f32, float, KF_ID)
KF_COMPARE(f64, double, KF_ID)
KF_COMPARE(f16, unsigned short, KF_H)
KF_COMPARE(bf16, unsigned short, KF_B)
KF_COMPARE(i8, signed char, KF_ID)
KF_COMPARE(u8, unsigned char, KF_ID)
KF_COMPARE(i16, short, KF_ID)
KF_COMPARE(u16, unsigned short, KF_ID)
KF_COMPARE(i32, int, KF_ID)
KF_COMPARE(u32, unsigned, KF_ID)
KF_COMPARE(i64, i64, KF_ID)
KF_COMPARE(u64, u64, KF_ID)
)CUDA";
  return src;
}

device_utils::device_utils(const compiler& c, const std::string& arch) {
  compile_request req;
  req.source = device_utils_source();
  req.name = "kforge_device_utils.cu";
  req.arch = arch;
  for (const char* t : type_names) {
    req.name_expressions.push_back(std::string("kf_fill_") + t);
    req.name_expressions.push_back(std::string("kf_compare_") + t);
  }
  const auto res = c.compile(req);
  if (!res.ok) throw error("the worker's helper kernels do not compile for " + arch + ":\n" + res.log);
  const auto& d = driver();
  check(d.cuModuleLoadData_(&module_, res.cubin.data()), "cuModuleLoadData(helpers)");
  for (int i = 0; i < 12; ++i) {
    check(d.cuModuleGetFunction_(&fill_[i], module_, (std::string("kf_fill_") + type_names[i]).c_str()),
          "helper fill");
    check(d.cuModuleGetFunction_(&compare_[i], module_, (std::string("kf_compare_") + type_names[i]).c_str()),
          "helper compare");
  }
  check(d.cuMemAlloc_(&stats_, 4 * sizeof(std::uint64_t)), "cuMemAlloc(compare stats)");
}

device_utils::~device_utils() {
  try {
    const auto& d = driver();
    if (stats_) d.cuMemFree_(stats_);
    if (module_) d.cuModuleUnload_(module_);
  } catch (...) {
  }
}

namespace {
unsigned grid_for(std::uint64_t n) {
  const std::uint64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(std::min<std::uint64_t>(blocks, 132ull * 32));
}
}  // namespace

void device_utils::fill(CUdeviceptr ptr, dtype t, std::uint64_t count, const fill_spec& f, std::uint64_t seed,
                        CUstream s) const {
  int kind = static_cast<int>(f.k);
  double a = f.a, b = f.b;
  void* args[] = {&ptr, &count, &kind, &a, &b, &seed};
  check(driver().cuLaunchKernel_(fill_[static_cast<int>(t)], grid_for(count), 1, 1, 256, 1, 1, 0, s, args,
                                 nullptr),
        "fill launch");
}

compare_result device_utils::compare(CUdeviceptr out, CUdeviceptr ref, dtype t, std::uint64_t count,
                                     const tolerance& tol, CUstream s) const {
  const auto& d = driver();
  std::uint64_t init[4] = {0, 0, ~0ull, 0};
  check(d.cuMemcpyHtoD_(stats_, init, sizeof init), "compare init");
  double rel = tol.rel, abs_tol = tol.abs;
  CUdeviceptr stats = stats_;
  void* args[] = {&out, &ref, &count, &rel, &abs_tol, &stats};
  check(
      d.cuLaunchKernel_(compare_[static_cast<int>(t)], grid_for(count), 1, 1, 256, 1, 1, 0, s, args, nullptr),
      "compare launch");
  check(d.cuStreamSynchronize_(s), "compare");
  std::uint64_t got[4];
  check(d.cuMemcpyDtoH_(got, stats_, sizeof got), "compare read");
  compare_result r;
  r.bad = got[0];
  r.nan = got[1];
  r.first_bad = got[2];
  std::memcpy(&r.max_abs_error, &got[3], sizeof(double));
  return r;
}

}  // namespace kf::cuda
