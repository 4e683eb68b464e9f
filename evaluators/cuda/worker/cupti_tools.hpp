// CUPTI inside the worker: the range profiler (metrics of the kernels a launch enqueues, CUDA 13.0's
// cuptiRangeProfiler* API with kernel replay and auto ranges: one range per kernel) and an
// activity-record timer (the durations of a kernel's launches alone, excluding anything between them).
// The same profiler serves Python programs through a C interface (profiler_capi.h).
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

/// The metrics of one range: with auto ranges, one kernel launch (its name is the kernel's).
struct range_metrics {
  std::string name;
  std::map<std::string, double> values;
};

class range_profiler {
 public:
  /// Checks device support and reads the counter availability. Throws profiling_unavailable with the
  /// reason (e.g. CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) when profiling is not possible. `keep_session`:
  /// hold a range-profiler session on the context between profiles (kforge-worker); without it a
  /// session exists only while profile_ranges collects (a process that also runs unprofiled work).
  range_profiler(CUcontext ctx, CUdevice dev, int device_index, bool keep_session = true);
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
  /// The same for a launch that enqueues up to `max_ranges` kernels (a program: a Python call): one
  /// entry per kernel, in launch order, each with its metrics (NaN where a metric came back empty) and
  /// "cupti.passes". Kernels past `max_ranges` are not profiled (CUPTI drops them). Always in a session
  /// of its own, so it can run between the single-kernel profiles.
  std::vector<range_metrics> profile_ranges(const std::vector<std::string>& metrics,
                                            const std::function<void()>& prepare,
                                            const std::function<void()>& launch, std::size_t max_ranges);
  /// Ranges CUPTI dropped in the last collection (kernels past max_ranges).
  std::size_t dropped_ranges() const noexcept { return dropped_; }

 private:
  struct config_image;
  std::vector<range_metrics> collect(void* object, const std::vector<std::string>& metrics,
                                     const std::function<void()>& prepare,
                                     const std::function<void()>& launch, bool user_replay,
                                     std::size_t max_ranges);
  void enable();
  void disable();
  void* object_ = nullptr;  // the persistent session (CUpti_RangeProfiler_Object*)
  config_image& config_for(const std::vector<std::string>& metrics);
  CUcontext ctx_;
  bool keep_session_;
  std::size_t dropped_ = 0;
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
