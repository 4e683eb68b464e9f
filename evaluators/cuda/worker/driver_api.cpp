#include "evaluators/cuda/worker/driver_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "kforge/error.hpp"

namespace kf::cuda {

namespace {
driver_api load() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    throw error(std::string("the CUDA driver (libcuda.so.1) cannot be loaded: ") +
                (e ? e : "unknown reason") + "; GPU evaluation needs an NVIDIA driver");
  }
  using get_proc_t = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<get_proc_t>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) throw error("libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12");
  driver_api api;
  auto resolve = [&](const char* name, void** slot) {
    CUdriverProcAddressQueryResult st{};
    const CUresult r = get_proc(name, slot, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    if (r != CUDA_SUCCESS || !*slot)
      throw error(std::string("the CUDA driver lacks ") + name + " for CUDA " + std::to_string(CUDA_VERSION) +
                  " (driver older than the toolkit?)");
  };
#define KF_RESOLVE(name) resolve(#name, reinterpret_cast<void**>(&api.name##_));
  KF_CUDA_DRIVER_FUNCTIONS(KF_RESOLVE)
#undef KF_RESOLVE
  return api;
}
}  // namespace

const driver_api& driver() {
  static std::once_flag once;
  static driver_api api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      api = load();
    } catch (const error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw error(failure);
  return api;
}

std::string describe(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    const auto& d = driver();
    d.cuGetErrorName_(r, &name);
    d.cuGetErrorString_(r, &text);
  } catch (...) {
  }
  return std::string(name ? name : ("CUresult " + std::to_string(static_cast<int>(r))).c_str()) +
         (text ? std::string(": ") + text : std::string());
}

cuda_failure::cuda_failure(CUresult r, const std::string& where)
    : std::runtime_error(where + ": " + describe(r)), code_(r) {}

bool cuda_failure::sticky() const noexcept {
  switch (code_) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

void check(CUresult r, const char* where) {
  if (r != CUDA_SUCCESS) throw cuda_failure(r, where);
}

}  // namespace kf::cuda
