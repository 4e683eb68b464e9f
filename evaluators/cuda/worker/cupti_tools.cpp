#include "evaluators/cuda/worker/cupti_tools.hpp"

#include <cupti_activity.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kf::cuda {

namespace {
// A CUPTI parameter struct: zeroed, with its size set (what every CUPTI call expects).
template <class T>
T make_params(std::size_t size) {
  T p{};
  p.structSize = size;
  return p;
}

std::string cupti_text(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : ("CUptiResult " + std::to_string(static_cast<int>(r)));
}

// KFORGE_CUPTI_TRACE=1: each CUPTI call's name and result on stderr as it returns (to find where a
// process dies inside CUPTI: the call after the last line).
bool tracing() {
  static const bool on = [] {
    const char* e = std::getenv("KFORGE_CUPTI_TRACE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

void cupti_check(CUptiResult r, const char* where) {
  if (tracing()) {
    std::fprintf(stderr, "kforge cupti: %s -> %d\n", where, static_cast<int>(r));
    std::fflush(stderr);
  }
  if (r != CUPTI_SUCCESS) throw profiling_unavailable(std::string(where) + ": " + cupti_text(r));
}

std::string key_of(const std::vector<std::string>& metrics) {
  std::string k;
  for (const auto& m : metrics)
    k += m + ";";
  return k;
}

std::vector<const char*> c_names(const std::vector<std::string>& metrics) {
  std::vector<const char*> v;
  for (const auto& m : metrics)
    v.push_back(m.c_str());
  return v;
}
}  // namespace

struct range_profiler::config_image {
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<std::uint8_t> image;
  std::size_t passes = 0;
  ~config_image() {
    if (host) {
      auto p = make_params<CUpti_Profiler_Host_Deinitialize_Params>(
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      p.pHostObject = host;
      cuptiProfilerHostDeinitialize(&p);
    }
  }
};

range_profiler::range_profiler(CUcontext ctx, CUdevice dev, int device_index, bool keep_session)
    : ctx_(ctx), keep_session_(keep_session) {
  static std::once_flag once;
  static CUptiResult init_result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    auto p = make_params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    init_result = cuptiProfilerInitialize(&p);
  });
  cupti_check(init_result, "cuptiProfilerInitialize");
  auto sup =
      make_params<CUpti_Profiler_DeviceSupported_Params>(CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  sup.cuDevice = dev;
  sup.api = CUPTI_PROFILER_RANGE_PROFILING;
  cupti_check(cuptiProfilerDeviceSupported(&sup), "cuptiProfilerDeviceSupported");
  if (sup.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    std::string why = "profiling unsupported on this device:";
    if (sup.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " architecture";
    if (sup.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " sli";
    if (sup.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " vgpu";
    if (sup.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " confidential-compute";
    if (sup.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " cmp";
    if (sup.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " wsl";
    throw profiling_unavailable(why);
  }
  auto chip = make_params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<std::size_t>(device_index);
  cupti_check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  chip_ = chip.pChipName ? chip.pChipName : "";
  auto av = make_params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  av.ctx = ctx_;
  cupti_check(cuptiProfilerGetCounterAvailability(&av), "cuptiProfilerGetCounterAvailability(size)");
  availability_.resize(av.counterAvailabilityImageSize);
  av.pCounterAvailabilityImage = availability_.data();
  cupti_check(cuptiProfilerGetCounterAvailability(&av), "cuptiProfilerGetCounterAvailability");
  if (keep_session_) enable();
}

range_profiler::~range_profiler() {
  disable();
  configs_.clear();
}

void range_profiler::enable() {
  if (object_) return;
  auto en = make_params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  en.ctx = ctx_;
  cupti_check(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable");
  object_ = en.pRangeProfilerObject;
}

void range_profiler::disable() {
  if (!object_) return;
  auto p = make_params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = static_cast<CUpti_RangeProfiler_Object*>(object_);
  cuptiRangeProfilerDisable(&p);
  object_ = nullptr;
}

namespace {
// One range-profiler session: enabled for one collection and disabled after it (a session that had
// collected one metric set returned nothing for a second, multi-pass one on an H200).
class session {
 public:
  explicit session(CUcontext ctx) {
    auto en = make_params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    en.ctx = ctx;
    cupti_check(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable");
    obj_ = en.pRangeProfilerObject;
  }
  ~session() {
    auto p = make_params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = obj_;
    cuptiRangeProfilerDisable(&p);
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  CUpti_RangeProfiler_Object* get() const noexcept { return obj_; }

 private:
  CUpti_RangeProfiler_Object* obj_ = nullptr;
};
}  // namespace

range_profiler::config_image& range_profiler::config_for(const std::vector<std::string>& metrics) {
  const auto key = key_of(metrics);
  if (auto it = configs_.find(key); it != configs_.end()) return *it->second;
  auto c = std::make_unique<config_image>();
  auto hi =
      make_params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hi.pChipName = chip_.c_str();
  hi.pCounterAvailabilityImage = availability_.data();
  cupti_check(cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize");
  c->host = hi.pHostObject;
  auto names = c_names(metrics);
  auto am = make_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  am.pHostObject = c->host;
  am.ppMetricNames = names.data();
  am.numMetrics = names.size();
  cupti_check(cuptiProfilerHostConfigAddMetrics(&am),
              "cuptiProfilerHostConfigAddMetrics (unknown metric name?)");
  auto sz = make_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  sz.pHostObject = c->host;
  cupti_check(cuptiProfilerHostGetConfigImageSize(&sz), "cuptiProfilerHostGetConfigImageSize");
  c->image.resize(sz.configImageSize);
  auto gi = make_params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  gi.pHostObject = c->host;
  gi.configImageSize = c->image.size();
  gi.pConfigImage = c->image.data();
  cupti_check(cuptiProfilerHostGetConfigImage(&gi), "cuptiProfilerHostGetConfigImage");
  auto np = make_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  np.configImageSize = c->image.size();
  np.pConfigImage = c->image.data();
  cupti_check(cuptiProfilerHostGetNumOfPasses(&np), "cuptiProfilerHostGetNumOfPasses");
  c->passes = np.numOfPasses;
  auto& ref = *c;
  configs_.emplace(key, std::move(c));
  return ref;
}

std::size_t range_profiler::passes(const std::vector<std::string>& metrics) {
  return config_for(metrics).passes;
}

std::map<std::string, double> range_profiler::profile(const std::vector<std::string>& metrics,
                                                      const std::function<void()>& prepare,
                                                      const std::function<void()>& launch,
                                                      bool fresh_session) {
  std::vector<range_metrics> ranges;
  if (fresh_session) {
    // A session that has collected one metric set returned nothing for a second, multi-pass set (H200,
    // CUDA 13.0): collect that one in a session of its own, then restore the persistent session.
    disable();
    try {
      session s(ctx_);
      ranges = collect(s.get(), metrics, prepare, launch, false, 1);
    } catch (...) {
      enable();
      throw;
    }
    enable();
  } else {
    enable();
    ranges = collect(object_, metrics, prepare, launch, false, 1);
  }
  auto empty = [&](const std::map<std::string, double>& v) {
    return std::all_of(metrics.begin(), metrics.end(),
                       [&](const std::string& m) { return std::isnan(v.at(m)); });
  };
  if (empty(ranges.front().values) && config_for(metrics).passes > 1) {
    ranges = collect(object_, metrics, prepare, launch, true, 1);
    ranges.front().values["cupti.user_replay"] = 1;
  }
  return ranges.front().values;
}

std::vector<range_metrics> range_profiler::profile_ranges(const std::vector<std::string>& metrics,
                                                          const std::function<void()>& prepare,
                                                          const std::function<void()>& launch,
                                                          std::size_t max_ranges) {
  if (max_ranges == 0) throw profiling_unavailable("profile_ranges: max_ranges must be positive");
  disable();
  std::vector<range_metrics> ranges;
  try {
    session s(ctx_);
    ranges = collect(s.get(), metrics, prepare, launch, false, max_ranges);
  } catch (...) {
    if (keep_session_) enable();
    throw;
  }
  if (keep_session_) enable();
  return ranges;
}

std::vector<range_metrics> range_profiler::collect(void* object, const std::vector<std::string>& metrics,
                                                   const std::function<void()>& prepare,
                                                   const std::function<void()>& launch, bool user_replay,
                                                   std::size_t max_ranges) {
  auto& cfg = config_for(metrics);
  auto* obj = static_cast<CUpti_RangeProfiler_Object*>(object);
  auto names = c_names(metrics);
  auto ds = make_params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  ds.pRangeProfilerObject = obj;
  ds.pMetricNames = names.data();
  ds.numMetrics = names.size();
  ds.maxNumOfRanges = max_ranges;
  ds.maxNumRangeTreeNodes = max_ranges;
  cupti_check(cuptiRangeProfilerGetCounterDataSize(&ds), "cuptiRangeProfilerGetCounterDataSize");
  std::vector<std::uint8_t> data(ds.counterDataSize);
  auto ci = make_params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  ci.pRangeProfilerObject = obj;
  ci.counterDataSize = data.size();
  ci.pCounterData = data.data();
  cupti_check(cuptiRangeProfilerCounterDataImageInitialize(&ci),
              "cuptiRangeProfilerCounterDataImageInitialize");
  auto sc =
      make_params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  sc.pRangeProfilerObject = obj;
  sc.configSize = cfg.image.size();
  sc.pConfig = cfg.image.data();
  sc.counterDataImageSize = data.size();
  sc.pCounterDataImage = data.data();
  sc.range = CUPTI_AutoRange;
  sc.replayMode = user_replay ? CUPTI_UserReplay : CUPTI_KernelReplay;
  sc.maxRangesPerPass = max_ranges;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  cupti_check(cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig");
  for (int pass = 0; pass < 64; ++pass) {
    prepare();  // outside the range: only `launch`'s kernels are profiled
    auto st = make_params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    st.pRangeProfilerObject = obj;
    cupti_check(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart");
    launch();
    auto sp = make_params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    sp.pRangeProfilerObject = obj;
    cupti_check(cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop");
    if (sp.isAllPassSubmitted) break;
  }
  auto dd =
      make_params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  dd.pRangeProfilerObject = obj;
  cupti_check(cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData");
  dropped_ = dd.numOfRangeDropped;
  auto info = make_params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  cupti_check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");
  if (info.numTotalRanges < 1)
    throw profiling_unavailable("the profiler recorded no range (was a kernel launched?)");
  std::vector<range_metrics> ranges;
  for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
    range_metrics out;
    auto ri = make_params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
    ri.pCounterDataImage = data.data();
    ri.counterDataImageSize = data.size();
    ri.rangeIndex = r;
    ri.rangeDelimiter = "/";
    const auto info_result = cuptiRangeProfilerCounterDataGetRangeInfo(&ri);
    if (tracing()) {
      std::fprintf(stderr, "kforge cupti: range %zu name %s -> %d\n", r, ri.rangeName ? ri.rangeName : "(null)",
                   static_cast<int>(info_result));
      std::fflush(stderr);
    }
    if (info_result == CUPTI_SUCCESS && ri.rangeName) out.name = ri.rangeName;
    std::vector<double> values(names.size(), 0.0);
    auto ev = make_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ev.pHostObject = cfg.host;
    ev.pCounterDataImage = data.data();
    ev.counterDataImageSize = data.size();
    ev.rangeIndex = r;
    ev.ppMetricNames = names.data();
    ev.numMetrics = names.size();
    ev.pMetricValues = values.data();
    cupti_check(cuptiProfilerHostEvaluateToGpuValues(&ev), "cuptiProfilerHostEvaluateToGpuValues");
    for (std::size_t i = 0; i < metrics.size(); ++i)
      out.values[metrics[i]] = values[i];
    out.values["cupti.passes"] = static_cast<double>(cfg.passes);
    ranges.push_back(std::move(out));
  }
  return ranges;
}

// ------------------------------------------------------------------------------------------------
namespace {
struct activity_state {
  std::mutex mu;
  std::vector<std::pair<std::string, double>> records;  // (kernel name, duration ms)
};
activity_state& state() {
  static activity_state s;
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr std::size_t bytes = 8u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  auto& s = state();
  std::lock_guard lk(s.mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      s.records.emplace_back(k->name ? k->name : "", static_cast<double>(k->end - k->start) * 1e-6);
    }
  }
  std::free(buffer);
}
}  // namespace

activity_timer::activity_timer() {
  static std::once_flag once;
  static CUptiResult reg = CUPTI_SUCCESS;
  std::call_once(once, [] { reg = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); });
  cupti_check(reg, "cuptiActivityRegisterCallbacks");
  cupti_check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
}

activity_timer::~activity_timer() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lk(state().mu);
  state().records.clear();
}

std::vector<double> activity_timer::take(const std::string& kernel_name) {
  cupti_check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  auto& s = state();
  std::lock_guard lk(s.mu);
  std::vector<double> out;
  for (const auto& [name, ms] : s.records)
    if (name == kernel_name) out.push_back(ms);
  s.records.clear();
  return out;
}

}  // namespace kf::cuda
