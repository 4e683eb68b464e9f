// kf::compiler: CUDA C++ source -> CUBIN with NVRTC, with an on-disk cache and the static metrics that
// the artefact carries (no GPU needed).
//
// Contract: compile() never throws for a bad kernel: a compiler error is a result with ok == false and
// the log. It throws kf::error only when NVRTC itself cannot be used. The cache key is a hash of the
// source, the sorted options, the name expressions, the NVRTC version and the architecture; a cached
// result is returned without compiling (cache_hit = true) and is byte-identical.
// Thread safety: compile() may be called concurrently (one nvrtcProgram per call).
// Implementation notes (evaluators/cuda/nvrtc/nvrtc_compiler.cpp): kforge adds -arch=<arch>, --ptxas-options=-v and
// --modify-stack-limit=false to the options; an option that sets the architecture itself is refused
// (ok == false). Compilation errors are cached like successes; NVRTC API failures are not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kf {

struct compile_request {
  std::string source;  ///< the full translation unit (parameters already injected or -D options)
  std::string name;    ///< file name shown in diagnostics, e.g. "stencil2d.cu"
  std::vector<std::string> options;  ///< NVRTC options, e.g. "-DBLOCK=128", "--use_fast_math"
  /// Entries: extern "C" names or template instantiations ("k<64,2>").
  std::vector<std::string> name_expressions;
  std::string arch = "sm_90";  ///< real architecture: a CUBIN is produced
  /// Headers by include name (NVRTC has no file system search of its own beyond -I options).
  std::map<std::string, std::string> headers;
};

/// Resources of one compiled kernel, read from the artefact (ptxas report and the CUBIN's .nv.info),
/// and the theoretical occupancy computed from them for a given block size.
/// Sources: registers, stack frame, barriers, launch bounds and constant memory come from the CUBIN
/// (what the driver loads) with the ptxas log as fallback; spills only from the log; static shared
/// memory from the log with the CUBIN as fallback. A disagreement adds a "kforge: ..." line to the log.
/// constant_bytes is module-wide (bank 3): every kernel of one CUBIN reports the same value.
struct static_metrics {
  int registers = 0;  ///< per thread
  int spill_stores_bytes = 0;
  int spill_loads_bytes = 0;
  int stack_frame_bytes = 0;    ///< local memory per thread (includes spills)
  int shared_static_bytes = 0;  ///< static __shared__ per block (without the 1 KiB the driver reserves)
  int constant_bytes = 0;       ///< user __constant__ memory
  /// From __launch_bounds__, 0 if unconstrained. (The driver's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  /// is also capped by registers; theoretical_occupancy applies that cap.)
  int max_threads_per_block = 0;
  int barriers = 0;
};

struct compiled_kernel {
  std::string name_expression;  ///< as requested
  std::string lowered_name;     ///< the symbol to look up in the module
  static_metrics metrics;
};

struct compile_result {
  bool ok = false;
  std::string log;  ///< NVRTC's log (warnings, errors, ptxas -v lines)
  std::vector<std::uint8_t> cubin;
  std::vector<compiled_kernel> kernels;  ///< one per name expression, in request order
  double seconds = 0;                    ///< compile wall time (0 for a cache hit)
  bool cache_hit = false;
  std::string key;  ///< the cache key (hex)
};

/// Device properties needed for theoretical occupancy. Defaults: an H200 (CC 9.0, 132 SMs).
struct device_limits {
  int cc_major = 9, cc_minor = 0;
  int sm_count = 132;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  int max_registers_per_block = 65536;
  int shared_per_sm = 233472;
  int shared_per_block_optin = 232448;
  int shared_reserved_per_block = 1024;
  int warp_size = 32;
  int max_threads_per_block = 1024;
};

struct occupancy {
  int blocks_per_sm = 0;
  double fraction = 0;     ///< active warps / maximum warps per SM
  std::string limited_by;  ///< "registers", "shared_memory", "threads", "blocks", "barriers" or "none"
};

/// Theoretical occupancy of a kernel launched with `block_threads` threads and `dynamic_shared` bytes of
/// dynamic shared memory (CUDA's occupancy calculator rules, as in cuda_occupancy.h with the default
/// shared-memory carveout and the kernel opted in to `shared_per_block_optin`).
/// limited_by: "none" when the SM's warp slots are full (fraction 1); otherwise the limit with the
/// fewest blocks, ties broken in the order threads, blocks, registers, shared_memory, barriers (a
/// resource that allows exactly as many blocks as the warp or block slots is not what to change). A launch
/// that cannot run (0 blocks) names what it exceeds: threads (block size above the device limit or the
/// kernel's __launch_bounds__, or not positive), registers (per block or per thread) or shared_memory.
occupancy theoretical_occupancy(const static_metrics& m, int block_threads, int dynamic_shared,
                                const device_limits& d = {});

class compiler {
 public:
  /// `cache_dir` empty: no disk cache. Creates the directory; throws kf::error when it cannot.
  explicit compiler(std::filesystem::path cache_dir = {});
  ~compiler();
  compiler(const compiler&) = delete;
  compiler& operator=(const compiler&) = delete;

  compile_result compile(const compile_request& r) const;
  /// The cache key of `r` (what compile() looks up; hashing a request costs as much as reading its
  /// source and headers).
  std::string cache_key(const compile_request& r) const;
  /// The disk cache's entry for `key` (cache_hit = true), without compiling; nullopt on a miss or without
  /// a disk cache.
  std::optional<compile_result> cached(const std::string& key) const;
  /// The disk cache's folder (empty: none).
  const std::filesystem::path& cache_dir() const;

  /// NVRTC's version, e.g. "13.0".
  static std::string nvrtc_version();
  /// The architectures NVRTC can target, e.g. {"sm_75", ..., "sm_90", ...}.
  static std::vector<std::string> supported_architectures();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A bounded pool of compile workers (oneTBB): at most `max_in_flight` tickets are submitted and not yet
/// taken (queued, compiling or finished); submit() blocks when the pool is full, so a fast producer cannot
/// queue unbounded work (each NVRTC compilation holds 120-160 MB). A single-threaded caller must therefore
/// take a result before submitting more than `max_in_flight` requests. Tickets start at 1. Details:
/// evaluators/cuda/nvrtc/compile_pool.cpp.
///
/// Out of process: with `process` not empty (and a compiler with a disk cache), each compilation that
/// misses the cache runs as a child process `process... --compile FILE --cache DIR` (kforge-worker), FILE
/// the request as JSON, DIR the compiler's cache, where the child stores its result; the pool then reads
/// it from there (cache_hit false, seconds the child's wall time). Reason: NVRTC runs the front end of
/// one process's compilations one at a time (measured with NVRTC 13.0: two threads parsing CuTe's
/// headers take twice as long as one, two processes no longer than one), which serialises header-heavy
/// kernels (CUTLASS/CuTe templates) whatever `threads` is. A child that leaves no entry (it could not
/// start, crashed, or hit an NVRTC failure that is not cached) is followed by the compilation in process.
class compile_pool {
 public:
  compile_pool(const compiler& c, std::size_t threads, std::size_t max_in_flight,
               std::vector<std::string> process = {});
  ~compile_pool();
  compile_pool(const compile_pool&) = delete;
  compile_pool& operator=(const compile_pool&) = delete;

  using ticket = std::uint64_t;
  ticket submit(compile_request r);
  /// Waits for the result of `t` (each ticket is taken exactly once; an unknown or already taken ticket
  /// throws kf::error).
  compile_result take(ticket t);
  /// A finished result, if any is ready (the smallest such ticket); does not block.
  std::optional<std::pair<ticket, compile_result>> try_take_any();
  std::size_t in_flight() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kf
