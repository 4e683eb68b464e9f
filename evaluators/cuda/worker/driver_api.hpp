// The CUDA driver API, loaded at run time (dlopen("libcuda.so.1")), so that no kforge binary needs a
// driver to start. Entry points come from cuGetProcAddress with the toolkit's CUDA_VERSION, so each
// name resolves to the variant (_v2, _v3, ...) that this toolkit's cuda.h declares.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

#define KF_CUDA_DRIVER_FUNCTIONS(X)                                                                        \
  X(cuInit)                                                                                                \
  X(cuDriverGetVersion)                                                                                    \
  X(cuDeviceGetCount)                                                                                      \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetPCIBusId)     \
      X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent)       \
          X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) \
              X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)    \
                  X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)       \
                      X(cuModuleGetGlobal) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel)   \
                          X(cuMemAlloc) X(cuMemFree) X(cuMemcpyDtoH) X(cuMemcpyHtoD) X(cuMemcpyDtoDAsync)  \
                              X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuGetErrorName) X(cuGetErrorString) \
                                  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuMemGetInfo)           \
                                      X(cuTensorMapEncodeTiled)

namespace kf::cuda {

struct driver_api {
#define KF_DECLARE(name) decltype(&::name) name##_ = nullptr;
  KF_CUDA_DRIVER_FUNCTIONS(KF_DECLARE)
#undef KF_DECLARE
};

/// The process's driver API. Throws kf::error (with dlerror's text) when libcuda.so.1 cannot be loaded
/// or an entry point is missing. Thread safe; loads once.
const driver_api& driver();

/// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
std::string describe(CUresult r);

/// A CUresult that is not CUDA_SUCCESS, as an exception.
class cuda_failure : public std::runtime_error {
 public:
  cuda_failure(CUresult r, const std::string& where);
  CUresult code() const noexcept { return code_; }
  /// Errors after which the context is unusable (faults, traps, a launch timeout).
  bool sticky() const noexcept;

 private:
  CUresult code_;
};

/// Throws cuda_failure unless r == CUDA_SUCCESS.
void check(CUresult r, const char* where);

}  // namespace kf::cuda
