// The C interface of the range profiler (profiler_capi.h): libkforge_cupti.so. Every entry point
// catches: no C++ exception crosses into the caller (a Python interpreter through ctypes).
#include "evaluators/cuda/worker/profiler_capi.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <cupti.h>

#include "evaluators/cuda/worker/cupti_tools.hpp"
#include "evaluators/cuda/worker/driver_api.hpp"
#include "kforge/error.hpp"

struct kf_cupti_profiler {
  std::unique_ptr<kf::cuda::range_profiler> profiler;
};

namespace {

void put_error(char* err, std::size_t err_size, const std::string& text) {
  if (!err || err_size == 0) return;
  const std::size_t n = std::min(text.size(), err_size - 1);
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

// KFORGE_CUPTI_TRACE=1: the steps on stderr (cupti_tools traces each CUPTI call).
void trace(const char* step) {
  static const bool on = [] {
    const char* e = std::getenv("KFORGE_CUPTI_TRACE");
    return e && *e && std::string(e) != "0";
  }();
  if (on) {
    std::fprintf(stderr, "kforge cupti: %s\n", step);
    std::fflush(stderr);
  }
}

// "a,b, c" -> {"a", "b", "c"}; empty names are skipped.
std::vector<std::string> split_names(const char* text) {
  std::vector<std::string> out;
  std::stringstream in(text ? text : "");
  for (std::string name; std::getline(in, name, ',');) {
    const auto b = name.find_first_not_of(" \t");
    const auto e = name.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(name.substr(b, e - b + 1));
  }
  return out;
}

// The context current on this thread, which must be device `ordinal`'s primary context (torch's). Not
// cuCtxGetDevice: through cuGetProcAddress at CUDA 13.0 that name resolves to cuCtxGetDevice_v2, which
// takes the context as a second argument (a call with one argument crashed on an H100).
std::pair<CUcontext, CUdevice> current_context(int ordinal) {
  const auto& d = kf::cuda::driver();
  CUcontext ctx = nullptr;
  kf::cuda::check(d.cuCtxGetCurrent_(&ctx), "cuCtxGetCurrent");
  if (!ctx)
    throw kf::error("no CUDA context is current on this thread: initialise the device first (e.g. "
                    "torch.cuda.init() and one operation on it)");
  CUdevice dev = 0;
  kf::cuda::check(d.cuDeviceGet_(&dev, ordinal), "cuDeviceGet");
  CUcontext primary = nullptr;
  kf::cuda::check(d.cuDevicePrimaryCtxRetain_(&primary, dev), "cuDevicePrimaryCtxRetain");
  d.cuDevicePrimaryCtxRelease_(dev);
  if (primary != ctx)
    throw kf::error("the current CUDA context is not device " + std::to_string(ordinal) +
                    "'s primary context (profile on the device the program runs on)");
  return {ctx, dev};
}

}  // namespace

extern "C" {

kf_cupti_profiler* kf_cupti_open(int ordinal, char* err, size_t err_size) {
  try {
    trace("kf_cupti_open: the driver");
    kf::cuda::driver();
    trace("kf_cupti_open: the current context");
    const auto [ctx, dev] = current_context(ordinal);
    uint32_t version = 0;
    cuptiGetVersion(&version);
    trace(("kf_cupti_open: CUPTI API version " + std::to_string(version) + ", the profiler").c_str());
    auto p = std::make_unique<kf_cupti_profiler>();
    p->profiler = std::make_unique<kf::cuda::range_profiler>(ctx, dev, ordinal, /*keep_session=*/false);
    return p.release();
  } catch (const std::exception& e) {
    put_error(err, err_size, e.what());
  } catch (...) {
    put_error(err, err_size, "unknown failure");
  }
  return nullptr;
}

char* kf_cupti_profile(kf_cupti_profiler* p, const char* metrics, kf_cupti_callback prepare,
                       kf_cupti_callback launch, void* user, size_t max_ranges, char* err, size_t err_size) {
  try {
    if (!p || !p->profiler) throw kf::error("kf_cupti_profile: no profiler (kf_cupti_open failed?)");
    if (!launch) throw kf::error("kf_cupti_profile: no launch callback");
    const auto names = split_names(metrics);
    if (names.empty()) throw kf::error("kf_cupti_profile: no metric names");
    const auto ranges = p->profiler->profile_ranges(
        names,
        [&] {
          if (prepare) prepare(user);
        },
        [&] { launch(user); }, max_ranges);
    nlohmann::json out = {{"chip", p->profiler->chip()},
                          {"passes", p->profiler->passes(names)},
                          {"dropped", p->profiler->dropped_ranges()},
                          {"ranges", nlohmann::json::array()}};
    for (const auto& r : ranges) {
      nlohmann::json values = nlohmann::json::object();
      for (const auto& [k, v] : r.values)
        values[k] = v;  // NaN is written as null
      out["ranges"].push_back({{"name", r.name}, {"metrics", std::move(values)}});
    }
    const std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    char* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (!copy) throw kf::error("kf_cupti_profile: out of host memory");
    std::memcpy(copy, text.c_str(), text.size() + 1);
    return copy;
  } catch (const std::exception& e) {
    put_error(err, err_size, e.what());
  } catch (...) {
    put_error(err, err_size, "unknown failure");
  }
  return nullptr;
}

void kf_cupti_free(char* text) {
  std::free(text);
}

void kf_cupti_close(kf_cupti_profiler* p) {
  try {
    delete p;
  } catch (...) {
  }
}

}  // extern "C"
