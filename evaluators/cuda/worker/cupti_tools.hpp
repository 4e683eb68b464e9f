// CUPTI inside the worker: the range profiler (metrics of one kernel launch, CUDA 13.0's
// cuptiRangeProfiler* API with kernel replay and auto ranges) and an activity-record timer (the
// durations of a kernel's launches alone, excluding anything between them).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kf::cuda {

/// Thrown when the profiler cannot be used here (not permitted, unsupported device, busy counters).
class profiling_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class range_profiler {
 public:
  /// Checks device support and reads the counter availability. Throws profiling_unavailable with the
  /// reason (e.g. CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) when profiling is not possible.
  range_profiler(CUcontext ctx, CUdevice dev, int device_index);
  ~range_profiler();
  range_profiler(const range_profiler&) = delete;
  range_profiler& operator=(const range_profiler&) = delete;

  /// The chip, e.g. "GH100".
  const std::string& chip() const noexcept { return chip_; }
  /// Replay passes that `metrics` need on this chip.
  std::size_t passes(const std::vector<std::string>& metrics);
  /// Metrics of the single kernel that `launch` enqueues. `prepare` (re-create the inputs) runs before
  /// each replay pass, outside the profiled region: with automatic ranges every kernel launched inside it
  /// would be a range of its own. Kernel replay needs one pass of `launch` (CUPTI restores memory); user
  /// replay, the fallback for multi-pass sets that kernel replay returns empty, calls both once per pass.
  /// `fresh_session`: collect in a session of its own (needed for a second, multi-pass metric set).
  std::map<std::string, double> profile(const std::vector<std::string>& metrics,
                                        const std::function<void()>& prepare,
                                        const std::function<void()>& launch, bool fresh_session = false);

 private:
  struct config_image;
  std::map<std::string, double> collect(void* object, const std::vector<std::string>& metrics,
                                        const std::function<void()>& prepare,
                                        const std::function<void()>& launch, bool user_replay);
  void enable();
  void disable();
  void* object_ = nullptr;  // the persistent session (CUpti_RangeProfiler_Object*)
  config_image& config_for(const std::vector<std::string>& metrics);
  CUcontext ctx_;
  std::string chip_;
  std::vector<std::uint8_t> availability_;
  std::map<std::string, std::unique_ptr<config_image>> configs_;
};

/// Kernel durations from CUPTI activity records (CONCURRENT_KERNEL), for one kernel name.
class activity_timer {
 public:
  /// Starts recording kernel activity (one subscriber per process).
  activity_timer();
  ~activity_timer();
  /// Flushes and returns the durations in ms of the recorded launches of `kernel_name`, in launch order,
  /// and forgets every record so far.
  std::vector<double> take(const std::string& kernel_name);
};

}  // namespace kf::cuda
