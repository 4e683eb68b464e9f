// Device-side helpers of the worker: seeded fills, output comparison and the L2 flush, as one NVRTC
// module compiled when the worker starts (no CUDA headers are needed in it: half and bfloat16 are
// converted with PTX cvt instructions).
#pragma once

#include <cstdint>
#include <string>

#include "evaluators/cuda/worker/driver_api.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"

namespace kf::cuda {

/// The CUDA source of the helper module.
const std::string& device_utils_source();

/// Result of comparing an output buffer with the reference output.
struct compare_result {
  std::uint64_t bad = 0;        ///< elements outside tolerance (NaN included)
  std::uint64_t nan = 0;        ///< NaN or Inf where the reference is finite (also unwritten: poisoned)
  std::uint64_t first_bad = 0;  ///< index of the first bad element (valid when bad > 0)
  double max_abs_error = 0;     ///< over finite pairs
};

class device_utils {
 public:
  /// Compiles (through `c`, so the module is cached on disk) and loads the helper module for `arch`.
  device_utils(const compiler& c, const std::string& arch);
  ~device_utils();
  device_utils(const device_utils&) = delete;
  device_utils& operator=(const device_utils&) = delete;

  /// Fills `count` elements of type `t` at `ptr` per `f`, with a counter-based generator keyed by `seed`.
  void fill(CUdeviceptr ptr, dtype t, std::uint64_t count, const fill_spec& f, std::uint64_t seed,
            CUstream s) const;
  /// Compares `out` with `ref` (`count` elements of `t`): |out - ref| <= abs + rel |ref|, NaN fails.
  compare_result compare(CUdeviceptr out, CUdeviceptr ref, dtype t, std::uint64_t count, const tolerance& tol,
                         CUstream s) const;

 private:
  CUmodule module_ = nullptr;
  CUfunction fill_[12] = {};
  CUfunction compare_[12] = {};
  CUdeviceptr stats_ = 0;  // compare's reduction scratch
};

}  // namespace kf::cuda
