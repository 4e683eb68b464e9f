#include "evaluators/cuda/worker/gpu_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "evaluators/cuda/worker/cupti_tools.hpp"
#include "evaluators/cuda/worker/device_utils.hpp"
#include "evaluators/cuda/worker/driver_api.hpp"
#include "evaluators/cuda/worker/nvml_clock.hpp"
#include "kforge/error.hpp"

namespace kf::cuda {

namespace {
using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

int attr(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check(driver().cuDeviceGetAttribute_(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

// A failed step of an evaluation: its status, message and whether the context is lost.
struct evaluation_failure {
  status st;
  std::string message;
  bool fatal;
};

[[noreturn]] void fail(status st, std::string message, bool fatal = false) {
  throw evaluation_failure{st, std::move(message), fatal};
}

// The status of a CUDA error raised while running a variant.
[[noreturn]] void fail_cuda(const cuda_failure& e, const char* during) {
  if (e.sticky()) fail(status::crashed, std::string(during) + ": " + e.what(), true);
  fail(status::launch_failed, std::string(during) + ": " + e.what());
}

// The driver's element type of a tensor map over a buffer of `t`: bit-exact copies, so signed 8- and 16-bit
// integers travel as their unsigned namesakes (the driver has no signed types of those sizes).
CUtensorMapDataType tensor_map_type(dtype t) {
  switch (t) {
    case dtype::u8:
    case dtype::i8:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case dtype::u16:
    case dtype::i16:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case dtype::u32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case dtype::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case dtype::u64:
      return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case dtype::i64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case dtype::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case dtype::f64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case dtype::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case dtype::f32:
    default:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
}

// cuTensorMapEncodeTiled over `address` with layout `t` (elements of `type`): element strides 1, no
// interleave; the swizzle, L2 promotion and out-of-bounds fill the layout names.
CUresult encode_tensor_map(CUtensorMap& map, const tensor_map_layout& t, dtype type, CUdeviceptr address) {
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = t.swizzle == 32    ? CU_TENSOR_MAP_SWIZZLE_32B
                                     : t.swizzle == 64  ? CU_TENSOR_MAP_SWIZZLE_64B
                                     : t.swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                        : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUtensorMapL2promotion l2 = t.l2_promotion == 64    ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                    : t.l2_promotion == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                    : t.l2_promotion == 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                                            : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  cuuint64_t dims[5] = {}, strides[5] = {};
  cuuint32_t box[5] = {};
  for (std::uint32_t d = 0; d < t.rank && d < 5; ++d) {
    dims[d] = t.dims[d];
    box[d] = t.box[d];
    if (d + 1 < t.rank) strides[d] = t.strides[d];
  }
  return driver().cuTensorMapEncodeTiled_(
      &map, tensor_map_type(type), t.rank, reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)),
      dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2,
      t.oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// "bf16, dims [4096, 4096], strides [8192] B, box [64, 128], swizzle 128 B" for messages.
std::string describe_layout(const tensor_map_layout& t, dtype type) {
  auto list = [&](auto first, std::uint32_t n) {
    std::string s = "[";
    for (std::uint32_t d = 0; d < n; ++d)
      s += (d ? ", " : "") + std::to_string(first[d]);
    return s + "]";
  };
  return std::string(to_string(type)) + ", dims " + list(t.dims.data(), t.rank) + ", strides " +
         list(t.strides.data(), t.rank ? t.rank - 1 : 0) + " B, box " + list(t.box.data(), t.rank) +
         ", swizzle " + std::to_string(t.swizzle) + " B";
}

// Median and the 95% confidence interval of the median by order statistics, relative to the median.
double relative_ci(std::vector<double> xs) {
  if (xs.size() < 3) return INFINITY;
  std::sort(xs.begin(), xs.end());
  const double n = static_cast<double>(xs.size());
  const double half = 0.98 * std::sqrt(n);
  const auto lo = static_cast<std::size_t>(std::max(0.0, std::floor(n / 2 - half)));
  const auto hi = static_cast<std::size_t>(std::min(n - 1, std::ceil(n / 2 + half)));
  const double med = xs.size() % 2 ? xs[xs.size() / 2] : 0.5 * (xs[xs.size() / 2 - 1] + xs[xs.size() / 2]);
  return med > 0 ? (xs[hi] - xs[lo]) / med : INFINITY;
}
}  // namespace

gpu_worker::gpu_worker(int device_ordinal, const std::filesystem::path& cache_dir) {
  const auto& d = driver();
  check(d.cuInit_(0), "cuInit");
  check(d.cuDeviceGet_(&dev_, device_ordinal), "cuDeviceGet");
  check(d.cuDevicePrimaryCtxRetain_(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent_(ctx_), "cuCtxSetCurrent");
  check(d.cuStreamCreate_(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d.cuEventCreate_(&ev_a_, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.cuEventCreate_(&ev_b_, CU_EVENT_DEFAULT), "cuEventCreate");
  char name[256] = {};
  check(d.cuDeviceGetName_(name, sizeof name, dev_), "cuDeviceGetName");
  char bus[64] = {};
  check(d.cuDeviceGetPCIBusId_(bus, sizeof bus, dev_), "cuDeviceGetPCIBusId");
  std::size_t mem = 0;
  check(d.cuDeviceTotalMem_(&mem, dev_), "cuDeviceTotalMem");
  int drv = 0;
  check(d.cuDriverGetVersion_(&drv), "cuDriverGetVersion");
  info_.device = device_ordinal;
  info_.name = name;
  info_.pci_bus_id = bus;
  lock_ = std::make_unique<device_lock>(info_.pci_bus_id);
  info_.memory_bytes = mem;
  info_.driver_version = drv;
  info_.cc_major = attr(dev_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info_.cc_minor = attr(dev_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info_.sm_count = attr(dev_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info_.l2_bytes = static_cast<std::uint64_t>(attr(dev_, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  auto& l = info_.limits;
  l.cc_major = info_.cc_major;
  l.cc_minor = info_.cc_minor;
  l.sm_count = info_.sm_count;
  l.max_threads_per_sm = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  l.max_blocks_per_sm = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  l.registers_per_sm = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  l.max_registers_per_block = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  l.shared_per_sm = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  l.shared_per_block_optin = attr(dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  l.shared_reserved_per_block = attr(dev_, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  l.warp_size = attr(dev_, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  compiler_ = std::make_unique<compiler>(cache_dir);
  utils_ = std::make_unique<device_utils>(*compiler_,
                                          "sm_" + std::to_string(info_.cc_major * 10 + info_.cc_minor));
  clock_ = std::make_unique<nvml_clock>(info_.pci_bus_id);
  info_.max_sm_clock_mhz = clock_->max_sm_mhz();
  // Twice the L2, rewritten before each timed launch so that every launch starts with a cold cache.
  flush_.bytes = std::max<std::size_t>(2 * info_.l2_bytes, 8u << 20);
  check(d.cuMemAlloc_(&flush_.ptr, flush_.bytes), "cuMemAlloc(L2 flush buffer)");
  try {
    profiler_ = std::make_unique<range_profiler>(ctx_, dev_, device_ordinal);
    info_.profiling = true;
    info_.profiling_note = "range profiler on " + profiler_->chip();
  } catch (const std::exception& e) {
    info_.profiling = false;
    info_.profiling_note = e.what();
  }
}

gpu_worker::~gpu_worker() {
  try {
    const auto& d = driver();
    profiler_.reset();
    d.cuStreamSynchronize_(stream_);
    for (auto& m : modules_)
      d.cuModuleUnload_(m.module);
    for (auto& [bytes, p] : free_buffers_)
      d.cuMemFree_(p);
    if (flush_.ptr) d.cuMemFree_(flush_.ptr);
    d.cuEventDestroy_(ev_a_);
    d.cuEventDestroy_(ev_b_);
    utils_.reset();
    d.cuStreamDestroy_(stream_);
    d.cuDevicePrimaryCtxRelease_(dev_);
  } catch (...) {
  }
}

const gpu_worker::module_entry& gpu_worker::load(const std::string& path, const std::string& function) {
  for (auto it = modules_.begin(); it != modules_.end(); ++it) {
    if (it->path == path && it->name == function) {
      modules_.splice(modules_.begin(), modules_, it);
      return modules_.front();
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(status::invalid, "cannot read the compiled module " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto& d = driver();
  module_entry e;
  e.path = path;
  e.name = function;
  try {
    check(d.cuModuleLoadData_(&e.module, bytes.data()), "cuModuleLoadData");
  } catch (const cuda_failure& f) {
    fail_cuda(f, "loading the module");
  }
  const CUresult r = d.cuModuleGetFunction_(&e.function, e.module, function.c_str());
  if (r != CUDA_SUCCESS) {
    d.cuModuleUnload_(e.module);
    fail(status::invalid, "the module has no function " + function + ": " + describe(r));
  }
  modules_.push_front(e);
  while (modules_.size() > 32) {
    d.cuModuleUnload_(modules_.back().module);
    modules_.pop_back();
  }
  return modules_.front();
}

gpu_worker::buffer gpu_worker::acquire(std::size_t bytes) {
  bytes = std::max<std::size_t>(256, (bytes + 255) / 256 * 256);
  auto it = free_buffers_.lower_bound(bytes);
  if (it != free_buffers_.end() && it->first <= 2 * bytes) {
    buffer b{it->second, it->first};
    pooled_bytes_ -= it->first;
    free_buffers_.erase(it);
    return b;
  }
  const auto& d = driver();
  buffer b{0, bytes};
  CUresult r = d.cuMemAlloc_(&b.ptr, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !free_buffers_.empty()) {
    for (auto& [sz, p] : free_buffers_)
      d.cuMemFree_(p);
    free_buffers_.clear();
    pooled_bytes_ = 0;
    r = d.cuMemAlloc_(&b.ptr, bytes);
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    fail(status::invalid, "buffers of " + std::to_string(bytes) + " bytes do not fit in device memory");
  check(r, "cuMemAlloc");
  return b;
}

void gpu_worker::release(buffer b) {
  if (!b.ptr) return;
  free_buffers_.emplace(b.bytes, b.ptr);
  pooled_bytes_ += b.bytes;
  // Keep the pool bounded (a quarter of device memory).
  while (pooled_bytes_ > info_.memory_bytes / 4 && !free_buffers_.empty()) {
    auto it = std::prev(free_buffers_.end());
    driver().cuMemFree_(it->second);
    pooled_bytes_ -= it->first;
    free_buffers_.erase(it);
  }
}

void gpu_worker::flush_l2() {
  check(driver().cuMemsetD32Async_(flush_.ptr, ++flush_counter_, flush_.bytes / 4, stream_), "L2 flush");
}

bool gpu_worker::wait(CUevent ev, double deadline_ms) {
  const auto& d = driver();
  const auto t0 = clock_type::now();
  while (true) {
    const CUresult r = d.cuEventQuery_(ev);
    if (r == CUDA_SUCCESS) return true;
    if (r != CUDA_ERROR_NOT_READY) check(r, "kernel execution");
    if (ms_since(t0) > deadline_ms) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// One shape of one evaluation: a device buffer per buffer argument, the parameter array of the kernel's
// parameters, and the launches. Buffers go back to the worker's pool when the shape ends.
class gpu_worker::shape_run {
 public:
  shape_run(gpu_worker& w, const gpu::shape_job& job) : w_(w), job_(job) {
    bufs_.resize(job.args.size());
    storage_.reserve(job.args.size());  // params_ points into it: no reallocation
    for (std::size_t i = 0; i < job.args.size(); ++i) {
      const auto& a = job.args[i];
      if (a.buffer) bufs_[i] = own(a.count * size_of(a.type));
      if (!a.param) continue;
      if (a.tensor_map) {
        // 128 zero bytes until encode_tensor_maps() (a map whose `when` was false stays so).
        maps_.push_back(std::make_unique<CUtensorMap>());
        params_.push_back(maps_.back().get());
        continue;
      }
      std::uint64_t slot = 0;
      if (a.buffer) {
        std::memcpy(&slot, &bufs_[i].ptr, sizeof(CUdeviceptr));
      } else if (a.type == dtype::f32) {
        const float f = static_cast<float>(a.scalar);
        std::memcpy(&slot, &f, sizeof f);
      } else if (a.type == dtype::f64) {
        std::memcpy(&slot, &a.scalar, sizeof(double));
      } else {
        const std::int64_t x = a.scalar_int;  // little endian: the low bytes are the narrower types
        std::memcpy(&slot, &x, sizeof x);
      }
      storage_.push_back(slot);
      params_.push_back(&storage_.back());
    }
  }
  ~shape_run() {
    for (auto& b : owned_)
      w_.release(b);
  }
  shape_run(const shape_run&) = delete;
  shape_run& operator=(const shape_run&) = delete;

  const gpu::shape_job& job() const { return job_; }
  const buffer& buf(std::size_t i) const { return bufs_[i]; }
  /// A scratch buffer released with the shape.
  buffer own(std::size_t bytes) {
    owned_.push_back(w_.acquire(bytes));
    return owned_.back();
  }

  /// Encodes every enabled tensor map argument over its buffer's device memory (cuTensorMapEncodeTiled,
  /// the layout the description resolved). A map the driver refuses is a launch_failed trial naming the
  /// argument, the layout and the driver's reason; nothing is launched.
  void encode_tensor_maps() {
    std::size_t m = 0;
    for (std::size_t i = 0; i < job_.args.size(); ++i) {
      const auto& a = job_.args[i];
      if (!a.param || !a.tensor_map) continue;
      CUtensorMap& map = *maps_[m++];
      const auto& t = *a.tensor_map;
      if (!t.enabled) continue;
      if (t.buffer >= job_.args.size() || !job_.args[t.buffer].buffer)
        fail(status::invalid, "tensor map " + a.name + " views argument #" + std::to_string(t.buffer) +
                                  ", which is not a buffer");
      const auto r = encode_tensor_map(map, t, job_.args[t.buffer].type, bufs_[t.buffer].ptr);
      if (r != CUDA_SUCCESS)
        fail(status::launch_failed, "cuTensorMapEncodeTiled for the tensor map " + a.name + " (" +
                                        describe_layout(t, job_.args[t.buffer].type) + "): " + describe(r));
    }
  }

  /// Fresh seeded inputs; written-only buffers poisoned (all bits set: NaN, or -1), so that an element
  /// the kernel leaves unwritten fails the check.
  void prepare_inputs(std::uint64_t seed) {
    const auto& d = driver();
    for (std::size_t i = 0; i < job_.args.size(); ++i) {
      const auto& a = job_.args[i];
      if (!a.buffer) continue;
      if (a.role == arg_role::out)
        check(d.cuMemsetD8Async_(bufs_[i].ptr, 0xFF, a.count * size_of(a.type), w_.stream_), "poison");
      else
        w_.utils_->fill(bufs_[i].ptr, a.type, a.count, a.fill, seed * 1000003ULL + i, w_.stream_);
    }
  }
  /// Copies every constant argument into the __constant__ symbol of its name in `m`. A module without the
  /// symbol, or with a smaller one, cannot run the variant: an invalid trial.
  void upload_constants(CUmodule m) {
    const auto& d = driver();
    for (std::size_t i = 0; i < job_.args.size(); ++i) {
      const auto& a = job_.args[i];
      if (!a.constant) continue;
      CUdeviceptr sym = 0;
      std::size_t bytes = 0;
      const CUresult r = d.cuModuleGetGlobal_(&sym, &bytes, m, a.name.c_str());
      if (r != CUDA_SUCCESS)
        fail(status::invalid, "the module has no __constant__ symbol '" + a.name +
                                  "' for the constant argument (" + describe(r) + ")");
      const std::size_t need = a.count * size_of(a.type);
      if (bytes < need)
        fail(status::invalid, "the __constant__ symbol '" + a.name + "' holds " + std::to_string(bytes) +
                                  " bytes; the argument has " + std::to_string(need));
      check(d.cuMemcpyDtoDAsync_(sym, bufs_[i].ptr, need, w_.stream_), "constant upload");
    }
  }
  void launch(CUfunction fn, const gpu::launch_geometry& g) {
    const CUresult r =
        driver().cuLaunchKernel_(fn, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1], g.block[2],
                                 g.shared_bytes, w_.stream_, params_.data(), nullptr);
    if (r != CUDA_SUCCESS) fail_cuda(cuda_failure(r, "cuLaunchKernel"), "launching the kernel");
  }
  /// One launch to completion under the watchdog; its event-timed duration in ms.
  double run_once(CUfunction fn, const gpu::launch_geometry& g, double deadline_ms, const char* what) {
    const auto& d = driver();
    check(d.cuEventRecord_(w_.ev_a_, w_.stream_), "cuEventRecord");
    launch(fn, g);
    check(d.cuEventRecord_(w_.ev_b_, w_.stream_), "cuEventRecord");
    try {
      if (!w_.wait(w_.ev_b_, deadline_ms))
        fail(status::timeout,
             std::string(what) + " ran longer than the watchdog's " + std::to_string(deadline_ms) + " ms",
             true);
    } catch (const cuda_failure& f) {
      fail_cuda(f, what);
    }
    float ms = 0;
    d.cuEventElapsedTime_(&ms, w_.ev_a_, w_.ev_b_);
    return static_cast<double>(ms);
  }

 private:
  gpu_worker& w_;
  const gpu::shape_job& job_;
  std::vector<buffer> bufs_;   // per argument (empty for scalars)
  std::vector<buffer> owned_;  // everything taken from the pool
  std::vector<std::uint64_t> storage_;
  std::vector<std::unique_ptr<CUtensorMap>> maps_;  // tensor map parameters (aligned as cuda.h declares)
  std::vector<void*> params_;
};

gpu_worker::loaded_variant gpu_worker::load_variant(const gpu::module_ref& candidate,
                                                    const std::optional<gpu::module_ref>& reference,
                                                    gpu::evaluate_response& out, bool record) {
  const auto& d = driver();
  const auto t0 = clock_type::now();
  loaded_variant v;
  const auto& cand = load(candidate.path, candidate.function);
  v.candidate_module = cand.module;
  v.candidate = cand.function;
  v.candidate_name = candidate.function;
  if (reference) {
    const auto& ref = load(reference->path, reference->function);
    v.reference_module = ref.module;
    v.reference = ref.function;
  }
  int x = 0;
  if (record) {
    d.cuFuncGetAttribute_(&x, CU_FUNC_ATTRIBUTE_NUM_REGS, v.candidate);
    out.metrics["launch.registers"] = x;
    d.cuFuncGetAttribute_(&x, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, v.candidate);
    out.metrics["launch.local_bytes"] = x;
    d.cuFuncGetAttribute_(&x, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, v.candidate);
    out.metrics["launch.shared_static_bytes"] = x;
  }
  d.cuFuncGetAttribute_(&v.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, v.candidate);
  out.load_s += ms_since(t0) / 1e3;
  return v;
}

double gpu_worker::check_shape(const gpu::evaluate_request& req, const loaded_variant& v, shape_run& run,
                               std::size_t si, gpu::evaluate_response& out) {
  const auto& d = driver();
  const auto& job = run.job();
  if (!job.check || !job.reference || !v.reference) return req.watchdog.min_ms;
  run.prepare_inputs(job.seed);
  // The reference writes the expected outputs; in-out buffers keep their inputs for the candidate.
  std::vector<buffer> saved(job.args.size()), expected(job.args.size());
  for (std::size_t i = 0; i < job.args.size(); ++i) {
    const auto& a = job.args[i];
    if (!a.buffer || a.role == arg_role::in) continue;
    const auto bytes = a.count * size_of(a.type);
    expected[i] = run.own(bytes);
    if (a.role == arg_role::inout) {
      saved[i] = run.own(bytes);
      check(d.cuMemcpyDtoDAsync_(saved[i].ptr, run.buf(i).ptr, bytes, stream_), "save inout");
    }
  }
  double ref_ms = 0;
  try {
    if (v.reference_module) run.upload_constants(v.reference_module);
    ref_ms = run.run_once(v.reference, *job.reference, req.watchdog.min_ms * 10, "the reference");
  } catch (const evaluation_failure& f) {
    fail(f.st == status::timeout ? status::timeout : status::crashed,
         "the reference kernel failed: " + f.message, true);
  }
  const double deadline = std::max(req.watchdog.min_ms, req.watchdog.factor * ref_ms);
  for (std::size_t i = 0; i < job.args.size(); ++i) {
    const auto& a = job.args[i];
    if (!a.buffer || a.role == arg_role::in) continue;
    const auto bytes = a.count * size_of(a.type);
    check(d.cuMemcpyDtoDAsync_(expected[i].ptr, run.buf(i).ptr, bytes, stream_), "keep reference output");
    if (a.role == arg_role::inout)
      check(d.cuMemcpyDtoDAsync_(run.buf(i).ptr, saved[i].ptr, bytes, stream_), "restore inout");
    else
      check(d.cuMemsetD8Async_(run.buf(i).ptr, 0xFF, bytes, stream_), "poison");
  }
  run.upload_constants(v.candidate_module);
  run.run_once(v.candidate, job.candidate, deadline, "the kernel");
  for (std::size_t i = 0; i < job.args.size(); ++i) {
    const auto& a = job.args[i];
    if (!a.buffer || a.role == arg_role::in || !a.compare) continue;
    const auto tol_it = req.tolerances.find(a.type);
    const tolerance tol = tol_it != req.tolerances.end() ? tol_it->second : tolerance{0, 0};
    const auto cmp = utils_->compare(run.buf(i).ptr, expected[i].ptr, a.type, a.count, tol, stream_);
    if (cmp.bad > 0) {
      char buf[400];
      std::snprintf(
          buf, sizeof buf,
          "argument #%zu: %llu of %llu elements outside tolerance (rel %g, abs %g), first at index %llu; "
          "%llu NaN/Inf or unwritten; max |error| %.3g (shape %zu)",
          i, static_cast<unsigned long long>(cmp.bad), static_cast<unsigned long long>(a.count), tol.rel,
          tol.abs, static_cast<unsigned long long>(cmp.first_bad), static_cast<unsigned long long>(cmp.nan),
          cmp.max_abs_error, si);
      fail(status::wrong_result, buf);
    }
  }
  out.metrics["check.reference_ms.shape" + std::to_string(si)] = ref_ms;
  return deadline;
}

std::vector<double> gpu_worker::time_shape(const gpu::evaluate_request& req, const loaded_variant& v,
                                           shape_run& run, double deadline, std::size_t si,
                                           gpu::evaluate_response& out) {
  const auto& d = driver();
  const auto& job = run.job();
  const auto& g = job.candidate;
  const auto& timing = req.timing;
  run.prepare_inputs(job.seed + 7919);
  run.upload_constants(v.candidate_module);
  for (int w = 0; w < std::max(1, timing.warmup); ++w)
    run.run_once(v.candidate, g, deadline, "the kernel (warm-up)");
  // Launches shorter than min_batch_us are timed in back-to-back batches (one flush per batch).
  int batch = 1;
  if (timing.min_batch_us > 0) {
    const double est = run.run_once(v.candidate, g, deadline, "the kernel");
    if (est > 0 && est * 1e3 < timing.min_batch_us)
      batch = static_cast<int>(std::ceil(timing.min_batch_us / (est * 1e3)));
  }
  std::unique_ptr<activity_timer> activity;
  if (timing.timer == "cupti") activity = std::make_unique<activity_timer>();
  // Rounds of launches between event pairs, until the median's confidence interval is tight enough or a
  // limit is reached.
  std::vector<double> samples;
  const int round = std::max(5, timing.min_repeats / 2);
  std::vector<CUevent> starts(round, nullptr), ends(round, nullptr);
  struct events_guard {
    std::vector<CUevent>& a;
    std::vector<CUevent>& b;
    ~events_guard() {
      for (std::size_t k = 0; k < a.size(); ++k) {
        if (a[k]) driver().cuEventDestroy_(a[k]);
        if (b[k]) driver().cuEventDestroy_(b[k]);
      }
    }
  } destroy{starts, ends};
  for (int k = 0; k < round; ++k) {
    check(d.cuEventCreate_(&starts[k], CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.cuEventCreate_(&ends[k], CU_EVENT_DEFAULT), "cuEventCreate");
  }
  const auto tb = clock_type::now();
  while (true) {
    for (int k = 0; k < round; ++k) {
      if (timing.flush_l2) flush_l2();
      check(d.cuEventRecord_(starts[k], stream_), "cuEventRecord");
      for (int b = 0; b < batch; ++b)
        run.launch(v.candidate, g);
      check(d.cuEventRecord_(ends[k], stream_), "cuEventRecord");
    }
    try {
      if (!wait(ends[round - 1], deadline * round * batch + 1000))
        fail(status::timeout, "timing runs exceeded the watchdog", true);
    } catch (const cuda_failure& f) {
      fail_cuda(f, "timing runs");
    }
    for (int k = 0; k < round; ++k) {
      float ms = 0;
      d.cuEventElapsedTime_(&ms, starts[k], ends[k]);
      samples.push_back(static_cast<double>(ms) / batch);
    }
    const auto n = static_cast<int>(samples.size());
    if (n >= timing.max_repeats || ms_since(tb) / 1e3 > timing.max_seconds) break;
    if (n >= timing.min_repeats && relative_ci(samples) <= timing.target_rel_ci) break;
  }
  const std::string tag = ".shape" + std::to_string(si);
  out.metrics["time.events_median_ms" + tag] = summarize(samples).median;
  if (activity) {
    auto durations = activity->take(v.candidate_name);
    if (!durations.empty()) {
      out.metrics["time.cupti_median_ms" + tag] = summarize(durations).median;
      if (batch == 1 && durations.size() == samples.size()) samples = durations;
    }
  }
  out.metrics["time.median_ms" + tag] = summarize(samples).median;
  out.metrics["time.repeats" + tag] = static_cast<double>(samples.size());
  out.metrics["time.batch" + tag] = batch;
  return samples;
}

void gpu_worker::profile_shape(const gpu::evaluate_request& req, const loaded_variant& v, shape_run& run,
                               std::size_t si, gpu::evaluate_response& out) {
  if (!profiler_) {
    out.notes = "profiling unavailable: " + info_.profiling_note;
    return;
  }
  // Fresh inputs and a cold L2 before each profiled pass, outside the profiled region.
  auto prepare = [&] {
    run.prepare_inputs(run.job().seed + 104729);
    run.upload_constants(v.candidate_module);
    if (req.timing.flush_l2) flush_l2();
    check(driver().cuStreamSynchronize_(stream_), "before profiling");
  };
  auto launch = [&] { run.launch(v.candidate, run.job().candidate); };
  try {
    for (auto& [k, val] : profiler_->profile(req.metrics, prepare, launch))
      out.metrics[k] = val;
    // A deeper set for the best variants only (a new best of the run).
    const auto med = out.metrics.find("time.median_ms.shape" + std::to_string(si));
    if (!req.deep_metrics.empty() && med != out.metrics.end() && med->second < req.deep_if_faster_than_ms)
      for (auto& [k, val] : profiler_->profile(req.deep_metrics, prepare, launch, true))
        out.metrics[k == "cupti.passes" ? "cupti.deep_passes" : k] = val;
  } catch (const profiling_unavailable& e) {
    out.notes = std::string("profiling failed, timing only: ") + e.what();
  } catch (const cuda_failure& f) {
    fail_cuda(f, "profiling");
  }
}

gpu::evaluate_response gpu_worker::evaluate(const gpu::evaluate_request& req) {
  gpu::evaluate_response resp;
  resp.id = req.id;
  try {
    const auto main_variant = load_variant(req.candidate, req.reference, resp, true);
    bool first_timed = true;
    for (std::size_t si = 0; si < req.shapes.size(); ++si) {
      const auto& job = req.shapes[si];
      // A shape with images of its own (specialised per shape) loads them; the module cache keeps both.
      const auto v = job.candidate_module || job.reference_module
                         ? load_variant(job.candidate_module.value_or(req.candidate),
                                        job.reference_module ? job.reference_module : req.reference, resp, false)
                         : main_variant;
      // Checks may share the GPU with other workers' checks; timing and profiling may not.
      const device_lock::guard hold(*lock_, job.time || job.profile);
      const std::uint64_t threads =
          std::uint64_t{job.candidate.block[0]} * job.candidate.block[1] * job.candidate.block[2];
      if (v.max_threads > 0 && threads > static_cast<std::uint64_t>(v.max_threads))
        fail(status::launch_failed, "a block of " + std::to_string(threads) +
                                        " threads exceeds the kernel's limit of " +
                                        std::to_string(v.max_threads) + " (registers or launch bounds)");
      if (job.candidate.shared_bytes > 48 * 1024) {
        const CUresult r =
            driver().cuFuncSetAttribute_(v.candidate, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(job.candidate.shared_bytes));
        if (r != CUDA_SUCCESS)
          fail(status::launch_failed, "dynamic shared memory of " +
                                          std::to_string(job.candidate.shared_bytes) +
                                          " bytes: " + describe(r));
      }
      // The reference runs with the default configuration's geometry, whose dynamic shared memory may
      // also be above the 48 KiB a launch gets without opting in.
      if (job.reference && v.reference && job.reference->shared_bytes > 48 * 1024) {
        const CUresult r =
            driver().cuFuncSetAttribute_(v.reference, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(job.reference->shared_bytes));
        if (r != CUDA_SUCCESS)
          fail(status::launch_failed, "the reference's dynamic shared memory of " +
                                          std::to_string(job.reference->shared_bytes) +
                                          " bytes: " + describe(r));
      }
      shape_run run(*this, job);
      run.encode_tensor_maps();
      const auto tc = clock_type::now();
      const double deadline = check_shape(req, v, run, si, resp);
      resp.check_s += ms_since(tc) / 1e3;
      if (job.time) {
        const auto tb = clock_type::now();
        auto samples = time_shape(req, v, run, deadline, si, resp);
        if (first_timed) {
          resp.times_ms = std::move(samples);
          resp.sm_clock_mhz = clock_->sm_mhz();
          first_timed = false;
        }
        resp.benchmark_s += ms_since(tb) / 1e3;
      }
      if (job.profile && !req.metrics.empty()) {
        const auto tp = clock_type::now();
        profile_shape(req, v, run, si, resp);
        resp.profile_s += ms_since(tp) / 1e3;
      }
      check(driver().cuStreamSynchronize_(stream_), "end of shape");
    }
    resp.st = status::ok;
  } catch (const evaluation_failure& f) {
    resp.st = f.st;
    resp.error = f.message;
    resp.fatal = f.fatal;
    resp.times_ms.clear();
  } catch (const cuda_failure& f) {
    resp.st = f.sticky() ? status::crashed : status::launch_failed;
    resp.error = f.what();
    resp.fatal = f.sticky();
    resp.times_ms.clear();
  }
  if (!resp.fatal) driver().cuStreamSynchronize_(stream_);
  return resp;
}

}  // namespace kf::cuda
