// kf::compiler: NVRTC compilation to a CUBIN, the disk cache and the static metrics of each kernel.
//
// Metric sources (both are ptxas' own figures; the CUBIN is what the driver loads and what
// cuFuncGetAttribute reports, so it wins where it carries the value):
//   registers              CUBIN EIATTR_REGCOUNT, else the log's "Used N registers"
//   stack_frame_bytes      CUBIN EIATTR_FRAME_SIZE, else the log's "N bytes stack frame"
//   spill stores/loads     the log only (the CUBIN has no record of them)
//   shared_static_bytes    the log's "N bytes smem" (0 when the "Used" line has none), else the size of
//                          `.nv.shared.<fn>` less the 1 KiB reserve when the CUBIN includes it (sm_90)
//   constant_bytes         CUBIN `.nv.constant3` (user __constant__, module-wide: every kernel of the
//                          module reports it), else the log's module "cmem[3]" (sm_90 logs omit it)
//   max_threads_per_block  CUBIN EIATTR_MAX_THREADS (or REQNTID), x*y*z; 0 when absent
//   barriers               CUBIN EIATTR_NUM_BARRIERS, else the log's "used N barriers"
// When both sources have a figure and they differ, a "kforge: ..." line naming both values is appended
// to the result's log (never seen on the kernels in tests/unit/compile_test.cpp). On the H200 every
// figure above equalled cuFuncGetAttribute's for those kernels (see the note in that test file).
#include <nvrtc.h>

#include <chrono>
#include <optional>
#include <span>

#include "evaluators/cuda/nvrtc/compile_cache.hpp"
#include "evaluators/cuda/nvrtc/cubin_reader.hpp"
#include "evaluators/cuda/nvrtc/ptxas_log.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"

namespace kf {
namespace {

using namespace kf::cuda::detail;

/// Owns an nvrtcProgram.
class program {
 public:
  program() = default;
  ~program() {
    if (p_) nvrtcDestroyProgram(&p_);
  }
  program(const program&) = delete;
  program& operator=(const program&) = delete;
  nvrtcProgram* out() { return &p_; }
  nvrtcProgram get() const { return p_; }

 private:
  nvrtcProgram p_ = nullptr;
};

std::string api_failure(const char* call, nvrtcResult rc) {
  return std::string("kforge: ") + call + " failed: " + nvrtcGetErrorString(rc) + "\n";
}

bool names_architecture(const std::string& option) {
  for (const char* prefix : {"-arch", "--gpu-architecture"})
    if (option.rfind(prefix, 0) == 0) return true;
  return false;
}

/// Fills `k.metrics` from the ptxas report and the CUBIN (see the table at the top of this file);
/// appends a note to `notes` for each figure the two sources disagree on.
void fill_metrics(compiled_kernel& k, const ptxas_report& log, const cubin_info* elf, std::string& notes) {
  const ptxas_function* lf = log.find(k.lowered_name);
  const cubin_function* ef = elf ? elf->find(k.lowered_name) : nullptr;
  auto pick = [&](const char* what, std::optional<int> from_elf, std::optional<int> from_log,
                  bool prefer_elf) {
    if (from_elf && from_log && *from_elf != *from_log)
      notes += "kforge: " + k.lowered_name + ": " + what + " differ (log " + std::to_string(*from_log) +
               ", CUBIN " + std::to_string(*from_elf) + "); using the " + (prefer_elf ? "CUBIN" : "log") +
               " value\n";
    if (prefer_elf) return from_elf ? *from_elf : from_log.value_or(0);
    return from_log ? *from_log : from_elf.value_or(0);
  };
  static_metrics& m = k.metrics;
  const auto none = std::optional<int>{};

  m.registers = pick("registers", ef ? ef->registers : none, lf ? lf->registers : none, true);
  m.stack_frame_bytes =
      pick("stack frame bytes", ef ? ef->frame_bytes : none, lf ? lf->stack_frame_bytes : none, true);
  m.spill_stores_bytes = lf ? lf->spill_stores_bytes.value_or(0) : 0;
  m.spill_loads_bytes = lf ? lf->spill_loads_bytes.value_or(0) : 0;

  // The log omits "bytes smem" for a kernel without static shared memory: a "Used" line means 0.
  std::optional<int> log_shared = lf ? lf->shared_bytes : none;
  if (!log_shared && lf && lf->registers) log_shared = 0;
  m.shared_static_bytes = pick(
      "static shared bytes", elf && ef ? elf->static_shared_bytes(k.lowered_name) : none, log_shared, false);

  std::optional<int> log_constant;
  if (auto it = log.module_cmem_bytes.find(user_constant_bank); it != log.module_cmem_bytes.end())
    log_constant = it->second;
  m.constant_bytes =
      pick("constant bytes", elf ? std::optional<int>(elf->user_constant_bytes()) : none, log_constant, true);

  if (ef) m.max_threads_per_block = ef->max_threads.value_or(ef->required_threads.value_or(0));
  // EIATTR_NUM_BARRIERS is absent when a kernel uses none.
  std::optional<int> elf_barriers = ef ? std::optional<int>(ef->barriers.value_or(0)) : none;
  m.barriers = pick("barriers", ef && ef->has_info ? elf_barriers : none, lf ? lf->barriers : none, true);
}

/// Runs NVRTC for `r`. `cacheable` is set when the outcome depends only on the request (success or a
/// compilation error), not on the process (out of memory, internal errors).
compile_result run_nvrtc(const compile_request& r, bool& cacheable) {
  compile_result res;
  cacheable = false;
  for (const auto& o : r.options)
    if (names_architecture(o)) {
      res.log = "kforge: option '" + o + "' sets the architecture; use compile_request::arch instead\n";
      cacheable = true;
      return res;
    }

  std::vector<const char*> header_names, header_sources;
  for (const auto& [name, content] : r.headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(content.c_str());
  }
  program prog;
  if (nvrtcResult rc = nvrtcCreateProgram(
          prog.out(), r.source.c_str(), r.name.empty() ? "kernel.cu" : r.name.c_str(),
          static_cast<int>(header_names.size()), header_sources.data(), header_names.data());
      rc != NVRTC_SUCCESS) {
    res.log = api_failure("nvrtcCreateProgram", rc);
    return res;
  }
  for (const auto& e : r.name_expressions)
    if (nvrtcResult rc = nvrtcAddNameExpression(prog.get(), e.c_str()); rc != NVRTC_SUCCESS) {
      res.log = api_failure("nvrtcAddNameExpression", rc);
      return res;
    }

  const std::string arch_option = "-arch=" + r.arch;
  std::vector<const char*> options{arch_option.c_str(), "--ptxas-options=-v", "--modify-stack-limit=false"};
  for (const auto& o : r.options)
    options.push_back(o.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());

  std::size_t log_size = 0;
  if (nvrtcResult rc = nvrtcGetProgramLogSize(prog.get(), &log_size); rc != NVRTC_SUCCESS) {
    res.log = api_failure("nvrtcGetProgramLogSize", rc);
    return res;
  }
  std::string log(log_size, '\0');
  if (log_size > 0) {
    if (nvrtcResult rc = nvrtcGetProgramLog(prog.get(), log.data()); rc != NVRTC_SUCCESS) {
      res.log = api_failure("nvrtcGetProgramLog", rc);
      return res;
    }
    while (!log.empty() && log.back() == '\0')
      log.pop_back();
  }
  res.log = std::move(log);
  if (compiled != NVRTC_SUCCESS) {
    cacheable = compiled == NVRTC_ERROR_COMPILATION || compiled == NVRTC_ERROR_INVALID_OPTION;
    if (compiled != NVRTC_ERROR_COMPILATION) res.log += api_failure("nvrtcCompileProgram", compiled);
    return res;
  }

  std::size_t cubin_size = 0;
  if (nvrtcResult rc = nvrtcGetCUBINSize(prog.get(), &cubin_size); rc != NVRTC_SUCCESS) {
    res.log += api_failure("nvrtcGetCUBINSize", rc);
    return res;
  }
  if (cubin_size == 0) {
    res.log += "kforge: NVRTC produced no CUBIN; compile_request::arch must be a real architecture (sm_XX)\n";
    cacheable = true;
    return res;
  }
  res.cubin.resize(cubin_size);
  if (nvrtcResult rc = nvrtcGetCUBIN(prog.get(), reinterpret_cast<char*>(res.cubin.data()));
      rc != NVRTC_SUCCESS) {
    res.cubin.clear();
    res.log += api_failure("nvrtcGetCUBIN", rc);
    return res;
  }
  for (const auto& e : r.name_expressions) {
    const char* lowered = nullptr;
    if (nvrtcResult rc = nvrtcGetLoweredName(prog.get(), e.c_str(), &lowered);
        rc != NVRTC_SUCCESS || !lowered) {
      res.log += api_failure("nvrtcGetLoweredName", rc);
      return res;
    }
    res.kernels.push_back({e, std::string(lowered), {}});  // copied: the string dies with the program
  }

  // Static metrics.
  cacheable = true;
  const ptxas_report report = parse_ptxas_log(res.log);
  std::optional<cubin_info> elf;
  std::string notes;
  try {
    elf = read_cubin(std::span<const std::uint8_t>(res.cubin.data(), res.cubin.size()));
  } catch (const kf::error& e) {
    notes += std::string("kforge: ") + e.what() + "; metrics come from the ptxas log only\n";
  }
  bool all_kernels = true;
  for (auto& k : res.kernels) {
    const cubin_function* f = elf ? elf->find(k.lowered_name) : nullptr;
    const bool in_cubin = elf ? (f && f->has_text) : report.find(k.lowered_name) != nullptr;
    if (!in_cubin) {
      notes += "kforge: '" + k.name_expression + "' (" + k.lowered_name + ") is not a kernel of the CUBIN\n";
      all_kernels = false;
      continue;
    }
    fill_metrics(k, report, elf ? &*elf : nullptr, notes);
  }
  res.log += notes;
  res.ok = all_kernels;
  return res;
}

}  // namespace

struct compiler::impl {
  std::optional<cuda::detail::disk_cache> cache;
  std::string version = compiler::nvrtc_version();
};

compiler::compiler(std::filesystem::path cache_dir) : impl_(std::make_unique<impl>()) {
  if (!cache_dir.empty()) impl_->cache.emplace(std::move(cache_dir));
}

std::string compiler::cache_key(const compile_request& r) const {
  return compile_cache_key(r, impl_->version);
}

std::optional<compile_result> compiler::cached(const std::string& key) const {
  if (!impl_->cache) return std::nullopt;
  auto hit = impl_->cache->load(key);
  if (hit) {
    hit->cache_hit = true;
    hit->seconds = 0;
  }
  return hit;
}

const std::filesystem::path& compiler::cache_dir() const {
  static const std::filesystem::path none;
  return impl_->cache ? impl_->cache->dir() : none;
}

compiler::~compiler() = default;

compile_result compiler::compile(const compile_request& r) const {
  const std::string key = cache_key(r);
  if (auto hit = cached(key)) return std::move(*hit);
  const auto start = std::chrono::steady_clock::now();
  bool cacheable = false;
  compile_result res = run_nvrtc(r, cacheable);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.key = key;
  res.cache_hit = false;
  if (impl_->cache && cacheable) impl_->cache->store(res);
  return res;
}

std::string compiler::nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcResult rc = nvrtcVersion(&major, &minor); rc != NVRTC_SUCCESS)
    throw kf::error(std::string("NVRTC is unusable: nvrtcVersion failed: ") + nvrtcGetErrorString(rc));
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> compiler::supported_architectures() {
  int n = 0;
  if (nvrtcResult rc = nvrtcGetNumSupportedArchs(&n); rc != NVRTC_SUCCESS)
    throw kf::error(std::string("NVRTC is unusable: nvrtcGetNumSupportedArchs failed: ") +
                    nvrtcGetErrorString(rc));
  std::vector<int> archs(static_cast<std::size_t>(n));
  if (n > 0)
    if (nvrtcResult rc = nvrtcGetSupportedArchs(archs.data()); rc != NVRTC_SUCCESS)
      throw kf::error(std::string("NVRTC is unusable: nvrtcGetSupportedArchs failed: ") +
                      nvrtcGetErrorString(rc));
  std::vector<std::string> out;
  for (int a : archs)
    out.push_back("sm_" + std::to_string(a));
  return out;
}

}  // namespace kf
