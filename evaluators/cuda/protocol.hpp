// The cuda evaluator's messages to its worker processes (kforge-worker, evaluators/cuda/worker), carried
// by the runner (evaluators/runner): one JSON object per line on the worker's stdin/stdout.
//
//   evaluator -> worker   {"op": "hello"}                          -> worker_info
//                         {"op": "evaluate", ...evaluate_request}  -> evaluate_response
//                         {"op": "exit"}
//
// A request names module images (CUBIN files) and symbols, not sources: the worker does not know which
// compiler made them. A response with fatal = true is the worker's last: its CUDA context is unusable (a
// fault, a hung kernel), it exits, and the runner starts a new one. Plain data only: no CUDA types.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/trial.hpp"

namespace kf::gpu {

struct launch_geometry {
  std::array<std::uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::uint32_t shared_bytes = 0;
};

/// A module image on disk and the symbol to launch from it.
struct module_ref {
  std::string path;
  std::string function;
};

/// One shape of one request: the arguments (shared by candidate and reference), the candidate's launch,
/// the reference's launch (absent: no check), and what to do on it.
struct shape_job {
  std::vector<resolved_arg> args;
  launch_geometry candidate;
  std::optional<launch_geometry> reference;
  /// Images of this shape when they differ from the request's (a Triton kernel specialised per shape: the
  /// integers that are multiples of 16 differ between shapes).
  std::optional<module_ref> candidate_module, reference_module;
  bool check = true;     ///< compare the outputs with the reference's
  bool time = false;     ///< time this shape (after its check)
  bool profile = false;  ///< collect metrics on this shape (after timing)
  std::uint64_t seed = 0;
};

struct timing_params {
  int warmup = 3;
  int min_repeats = 15;
  int max_repeats = 200;
  double target_rel_ci = 0.01;   ///< stop when the 95% CI of the median is within this fraction of it
  double max_seconds = 3.0;      ///< per shape, timing included
  bool flush_l2 = true;          ///< rewrite a buffer of twice the L2 size before each timed launch
  std::string timer = "events";  ///< "events" or "cupti" (activity records of the kernel alone)
  double min_batch_us = 0;       ///< >0: launches shorter than this are timed in back-to-back batches
};

struct watchdog_params {
  double min_ms = 2000;  ///< a launch may always take this long
  double factor = 100;   ///< ... or this many times the reference's time on the same shape
};

struct evaluate_request {
  std::uint64_t id = 0;
  module_ref candidate;
  std::optional<module_ref> reference;  ///< absent: nothing to check against
  std::vector<shape_job> shapes;
  std::map<dtype, tolerance> tolerances;
  timing_params timing;
  watchdog_params watchdog;
  std::vector<std::string> metrics;  ///< CUPTI metric names for shapes with profile = true
  /// A deeper metric set, collected too when the variant's median time beats deep_if_faster_than_ms
  /// (the run's best so far): deeper profiles for the best few only.
  std::vector<std::string> deep_metrics;
  double deep_if_faster_than_ms = 0;
};

struct evaluate_response {
  std::uint64_t id = 0;
  status st = status::ok;
  std::string error;
  std::vector<double> times_ms;
  double sm_clock_mhz = trial::nan;
  std::map<std::string, double, std::less<>> metrics;
  double load_s = 0, check_s = 0, benchmark_s = 0, profile_s = 0;
  bool fatal = false;
  std::string notes;  ///< e.g. "profiling not permitted: timing only"
};

struct worker_info {
  int device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;
  std::uint64_t l2_bytes = 0;
  int driver_version = 0;
  std::string pci_bus_id;
  bool profiling = false;  ///< the range profiler can be used here
  std::string profiling_note;
  double max_sm_clock_mhz = 0;
  device_limits limits;
};

nlohmann::json to_json(const evaluate_request& r);
evaluate_request request_from_json(const nlohmann::json& j);
nlohmann::json to_json(const evaluate_response& r);
evaluate_response response_from_json(const nlohmann::json& j);
nlohmann::json to_json(const worker_info& w);
worker_info worker_info_from_json(const nlohmann::json& j);

}  // namespace kf::gpu
