// kf::builder: the first half of the cuda evaluator (TVM MetaSchedule's Builder). It turns a
// configuration of a kernel into a loadable module image (a CUBIN on disk) plus the launch metadata a
// runner needs: the symbol, every shape's arguments and launch geometry, the static metrics. The runner
// (evaluators/runner) loads any such image, whoever compiled it.
//
//   submit(id, config) -> render (transforms, parameters) -> compile (a pool, a content-hash cache)
//                      -> static metrics + occupancy filter -> take() -> build_result
//
// Implementations: nvrtc_builder (CUDA C++ through NVRTC), triton_builder (Triton kernels through Triton's
// compiler in Python processes). A configuration whose launch cannot be formed or
// whose transforms do not apply is an `invalid` result, a compiler error a `compile_failed` result with
// the compiler's log: results, never exceptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluators/cuda/protocol.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"
#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

/// What a builder made of one configuration.
struct build_result {
  std::uint64_t id = 0;
  status st = status::ok;  ///< ok, compile_failed (the log in `error`) or invalid (why, in `error`)
  std::string error;
  gpu::module_ref image;                               ///< the module and the symbol to launch (status ok)
  std::vector<gpu::shape_job> shapes;                  ///< every shape's arguments and launches (status ok)
  std::map<std::string, double, std::less<>> metrics;  ///< static.* metrics of the artefact
  double seconds = 0;                                  ///< compile wall time (0 for a cache hit)
};

/// The result for a configuration whose launch cannot be formed or whose rendering does not apply.
inline build_result invalid_build(std::uint64_t id, const std::string& why) {
  build_result r;
  r.id = id;
  r.st = status::invalid;
  r.error = "cannot launch: " + why;
  return r;
}

class builder {
 public:
  virtual ~builder() = default;
  /// Queues one configuration; `seed` seeds its shapes' input fills. May block while the builder is full
  /// (bounded memory); must not be called from the thread that take()s results while it is full.
  virtual void submit(std::uint64_t id, const config& c, std::uint64_t seed) = 0;
  /// A finished build, waiting up to `wait` for one; nullopt when none finished in time.
  virtual std::optional<build_result> take(std::chrono::milliseconds wait) = 0;
  /// Builds submitted and not yet taken.
  virtual std::size_t pending() const = 0;
  /// Builds that run at once.
  virtual std::size_t parallelism() const = 0;
  /// The reference kernel's image, built once (nullopt when the kernel is checked against nothing).
  virtual std::optional<gpu::module_ref> reference() const = 0;
  /// Recorded with the run: compiler, version, architecture, cache.
  virtual nlohmann::json describe() const = 0;
};

struct nvrtc_builder_options {
  std::string arch = "sm_90";
  std::filesystem::path cache_dir;  ///< compile cache and CUBIN files
  std::size_t threads = 1;          ///< NVRTC compilations at once
  bool static_filter = true;        ///< a variant that cannot launch by its static resources is invalid
  /// Not empty: compilations run as child processes of this command (kforge-worker; compile_pool).
  std::vector<std::string> compile_process;
};

/// CUDA C++ through NVRTC. `limits` are the device's (from the runner's greeting) for the occupancy
/// filter. Throws kf::error when the reference kernel does not compile.
std::unique_ptr<builder> make_nvrtc_builder(std::shared_ptr<const kernel_spec> spec, nvrtc_builder_options o,
                                            const device_limits& limits);

struct triton_builder_options {
  int arch = 90;                    ///< compute capability compiled for (Triton targets sm_90a for 90)
  std::filesystem::path cache_dir;  ///< compiled images and the servers' cache
  std::size_t processes = 1;        ///< compile servers (Python processes) at once
  std::string python = "python3";   ///< the Python with triton that runs the compile servers
  std::filesystem::path python_path;  ///< put first on the servers' PYTHONPATH (the repository's python/)
  std::filesystem::path log_dir;      ///< the servers' stderr
  bool static_filter = true;          ///< a variant that cannot launch by its static resources is invalid
};

/// Triton kernels (language: triton) through Triton's own compiler, in a pool of compile servers
/// (python/kforge/triton/compile_server.py). Throws kf::error when the servers do not start or the
/// reference does not compile.
std::unique_ptr<builder> make_triton_builder(std::shared_ptr<const kernel_spec> spec, triton_builder_options o,
                                             const device_limits& limits);

/// The launch jobs of configuration `c` on every shape of `k`: check shapes first, then timed shapes,
/// arguments resolved, the reference's launch at the default configuration. Throws kf::error when a launch
/// cannot be formed (an invalid configuration).
std::vector<gpu::shape_job> launch_jobs(const kernel_spec& k, const config& c, std::uint64_t seed);

/// The #include'd files of `source` found in `include_dirs` (quoted includes also relative to `source_dir`),
/// recursively, by include name: what the compile cache key must cover. Includes that resolve nowhere
/// (system headers, files in inactive #if branches) are skipped.
std::map<std::string, std::string> collect_headers(const std::string& source,
                                                   const std::filesystem::path& source_dir,
                                                   const std::vector<std::filesystem::path>& include_dirs);

}  // namespace kf
