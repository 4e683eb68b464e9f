// kf::cuda::gpu_worker: the GPU side of the cuda evaluator, run inside a kforge-worker process that owns
// one device's primary context. It turns an evaluate_request (module images and their launches) into an
// evaluate_response, in named steps:
//
//   load the images -> for each shape: set up its buffers -> check against the reference
//                                                         -> time (L2 flushed, adaptive repeats)
//                                                         -> profile (CUPTI range profiler)
//
// Any step's failure ends the evaluation with a status (wrong_result, launch_failed, timeout, crashed,
// invalid). A fault or a hung kernel makes the response fatal: the process must exit after sending it.
#pragma once

#include <cuda.h>

#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "evaluators/cuda/protocol.hpp"
#include "evaluators/cuda/worker/device_lock.hpp"
#include "kforge/evaluators/compile.hpp"

namespace kf::cuda {

class device_utils;
class range_profiler;
class nvml_clock;

class gpu_worker {
 public:
  /// Initialises the driver and the device's primary context. Throws kf::error when it cannot.
  gpu_worker(int device_ordinal, const std::filesystem::path& cache_dir);
  ~gpu_worker();
  gpu_worker(const gpu_worker&) = delete;
  gpu_worker& operator=(const gpu_worker&) = delete;

  const gpu::worker_info& info() const noexcept { return info_; }
  gpu::evaluate_response evaluate(const gpu::evaluate_request& r);

 private:
  struct module_entry {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::string path, name;
  };
  struct buffer {
    CUdeviceptr ptr = 0;
    std::size_t bytes = 0;
  };
  /// The candidate and the reference, loaded (handles copied: the module cache may move its entries).
  struct loaded_variant {
    CUmodule candidate_module = nullptr, reference_module = nullptr;
    CUfunction candidate = nullptr, reference = nullptr;
    std::string candidate_name;
    int max_threads = 0;  ///< the candidate's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  };
  class shape_run;  // one shape's buffers, parameters and launches (gpu_worker.cpp)

  // The steps of evaluate().
  loaded_variant load_variant(const gpu::module_ref& candidate, const std::optional<gpu::module_ref>& reference,
                              gpu::evaluate_response& out, bool record_attributes);
  /// Checks the candidate against the reference on the shape; returns the watchdog deadline for the
  /// candidate's launches (a multiple of the reference's time).
  double check_shape(const gpu::evaluate_request& r, const loaded_variant& v, shape_run& run, std::size_t si,
                     gpu::evaluate_response& out);
  /// Times the candidate; returns the samples in ms.
  std::vector<double> time_shape(const gpu::evaluate_request& r, const loaded_variant& v, shape_run& run,
                                 double deadline_ms, std::size_t si, gpu::evaluate_response& out);
  void profile_shape(const gpu::evaluate_request& r, const loaded_variant& v, shape_run& run, std::size_t si,
                     gpu::evaluate_response& out);

  const module_entry& load(const std::string& path, const std::string& function);
  buffer acquire(std::size_t bytes);
  void release(buffer b);
  void flush_l2();
  /// Waits for `ev` until `deadline_ms` from now; false on timeout. Throws cuda_failure on a fault.
  bool wait(CUevent ev, double deadline_ms);

  gpu::worker_info info_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent ev_a_ = nullptr, ev_b_ = nullptr;  // single-launch timing around the watchdog
  std::unique_ptr<compiler> compiler_;
  std::unique_ptr<device_utils> utils_;
  std::unique_ptr<range_profiler> profiler_;
  std::unique_ptr<nvml_clock> clock_;
  std::unique_ptr<device_lock> lock_;  // timing and profiling have the GPU to themselves
  buffer flush_;
  unsigned flush_counter_ = 0;
  std::list<module_entry> modules_;  // most recently used first
  std::multimap<std::size_t, CUdeviceptr> free_buffers_;
  std::size_t pooled_bytes_ = 0;
};

}  // namespace kf::cuda
