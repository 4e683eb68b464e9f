#include "evaluators/cuda/worker/nvml_clock.hpp"

#include <dlfcn.h>

#include <cmath>

namespace kf::cuda {

nvml_clock::nvml_clock(const std::string& pci_bus_id) {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  auto init = reinterpret_cast<int (*)()>(::dlsym(lib, "nvmlInit_v2"));
  auto by_pci =
      reinterpret_cast<int (*)(const char*, void**)>(::dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  get_clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(::dlsym(lib, "nvmlDeviceGetClockInfo"));
  get_max_clock_ =
      reinterpret_cast<int (*)(void*, int, unsigned*)>(::dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
  if (!init || !by_pci || !get_clock_ || init() != 0) return;
  void* h = nullptr;
  if (by_pci(pci_bus_id.c_str(), &h) == 0) handle_ = h;
}

double nvml_clock::sm_mhz() const {
  unsigned mhz = 0;
  constexpr int nvml_clock_sm = 1;
  if (!handle_ || get_clock_(handle_, nvml_clock_sm, &mhz) != 0) return std::nan("");
  return mhz;
}

double nvml_clock::max_sm_mhz() const {
  unsigned mhz = 0;
  constexpr int nvml_clock_sm = 1;
  if (!handle_ || !get_max_clock_ || get_max_clock_(handle_, nvml_clock_sm, &mhz) != 0) return std::nan("");
  return mhz;
}

}  // namespace kf::cuda
