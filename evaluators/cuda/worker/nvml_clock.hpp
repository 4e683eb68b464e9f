// The SM clock of a device, read through NVML (dlopen'ed: optional; absent NVML gives NaN).
#pragma once

#include <string>

namespace kf::cuda {

class nvml_clock {
 public:
  /// `pci_bus_id` as cuDeviceGetPCIBusId gives it.
  explicit nvml_clock(const std::string& pci_bus_id);
  /// Current SM clock in MHz, or NaN when NVML is unavailable.
  double sm_mhz() const;
  double max_sm_mhz() const;
  bool available() const noexcept { return handle_ != nullptr; }

 private:
  void* handle_ = nullptr;
  int (*get_clock_)(void*, int, unsigned*) = nullptr;
  int (*get_max_clock_)(void*, int, unsigned*) = nullptr;
};

}  // namespace kf::cuda
