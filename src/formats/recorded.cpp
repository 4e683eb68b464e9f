#include "kforge/recorded.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/error.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

// A recorded number, or `fallback` when the field is absent, not a number, or not finite (Python's json
// writes NaN and Infinity; a cost or duration that is not finite is unknown).
double number_or(const json& obj, const char* key, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  const double x = it->get<double>();
  return std::isfinite(x) ? x : fallback;
}

// Kernel Tuner's key of a record: the str() of its parameter values, joined by ",".
std::string kernel_tuner_key(const recorded_record& r, const std::vector<std::string>& names) {
  std::string k;
  for (std::size_t i = 0; i < names.size(); ++i)
    k += (i ? "," : "") + r.params.at(names[i]).str();
  return k;
}

void set_times(trial& t, std::vector<double> times_ms) {
  const auto s = summarize(times_ms);
  t.times_ms = std::move(times_ms);
  t.time_ms = s.median;
  t.time_iqr_ms = s.iqr;
  t.time_min_ms = s.min;
}

// --- Kernel Tuner cache -------------------------------------------------------------------------
recorded_file read_kernel_tuner(const json& root, const std::string& path) {
  recorded_file f;
  f.path = path;
  f.format = "kernel_tuner";
  if (root.contains("device_name") && root["device_name"].is_string()) f.device_name = root["device_name"];
  if (root.contains("kernel_name") && root["kernel_name"].is_string()) f.kernel_name = root["kernel_name"];
  if (root.contains("problem_size")) f.problem_size = root["problem_size"];
  const auto& keys = root.at("tune_params_keys");
  for (const auto& k : keys)
    f.param_names.push_back(k.get<std::string>());
  if (root.contains("tune_params") && root["tune_params"].is_object()) {
    for (const auto& [name, vals] : root["tune_params"].items()) {
      auto v = from_json(vals);
      if (v.is_list()) f.param_values[name] = v.as_list();
    }
  }
  const auto& cache = root.at("cache");
  if (!cache.is_object()) throw error(path + ": 'cache' is not a mapping");
  f.records.reserve(cache.size());
  for (const auto& [key, rec] : cache.items()) {
    if (!rec.is_object()) throw error(path + ": cache record '" + key + "' is not a mapping");
    recorded_record r;
    for (const auto& name : f.param_names) {
      auto it = rec.find(name);
      if (it == rec.end()) throw error(path + ": cache record '" + key + "' lacks parameter '" + name + "'");
      r.params.emplace(name, from_json(*it));
    }
    if (const auto expected = kernel_tuner_key(r, f.param_names); expected != key)
      throw error(path + ": cache record '" + key +
                  "' disagrees with its parameter values, which give the key '" + expected + "'");
    trial& t = r.result;
    t.cost.compile = number_or(rec, "compile_time", 0) / 1e3;
    t.cost.check = number_or(rec, "verification_time", 0) / 1e3;
    t.cost.benchmark = number_or(rec, "benchmark_time", 0) / 1e3;
    t.cost.framework = number_or(rec, "framework_time", 0) / 1e3;
    t.cost.strategy = number_or(rec, "strategy_time", 0) / 1e3;
    std::string failure;
    if (rec.contains("__error__") && rec["__error__"].is_string()) failure = rec["__error__"];
    const auto tm = rec.find("time");
    if (failure.empty() && tm != rec.end() && tm->is_string()) failure = tm->get<std::string>();
    if (!failure.empty()) {
      if (failure == "InvalidConfig")
        t.st = status::invalid;
      else if (failure == "CompilationFailedConfig")
        t.st = status::compile_failed;
      else if (failure == "RuntimeFailedConfig")
        t.st = status::launch_failed;
      else
        throw error(path + ": cache record '" + key + "' has unknown failure '" + failure + "'");
      t.error = "recorded as " + failure;
      if (rec.contains("error") && rec["error"].is_string())
        t.error += ": " + rec["error"].get<std::string>();
    } else {
      // Runs that are not finite numbers (NaN, Infinity) are no measurement; a record with no finite
      // time at all is a failed launch.
      std::vector<double> times;
      bool any_time = false;
      if (rec.contains("times") && rec["times"].is_array())
        for (const auto& x : rec["times"])
          if (x.is_number()) {
            any_time = true;
            if (std::isfinite(x.get<double>())) times.push_back(x.get<double>());
          }
      if (times.empty() && tm != rec.end() && tm->is_number()) {
        any_time = true;
        if (std::isfinite(tm->get<double>())) times.push_back(tm->get<double>());
      }
      if (!any_time) throw error(path + ": cache record '" + key + "' has no time");
      if (times.empty()) {
        t.st = status::launch_failed;
        t.error = "recorded time is not a finite number";
      } else {
        t.st = status::ok;
        set_times(t, std::move(times));
        t.metrics["recorded_mean_time_ms"] = number_or(rec, "time", t.time_ms);
      }
      for (const char* m : {"GFLOP/s", "GB/s", "registers", "power", "energy"})
        if (rec.contains(m) && rec[m].is_number()) t.metrics[m] = rec[m].get<double>();
    }
    f.records.push_back(std::move(r));
  }
  return f;
}

// --- T4 ---------------------------------------------------------------------------------------------
double t4_unit_to_ms(const std::string& unit) {
  if (unit == "milliseconds" || unit == "miliseconds" || unit == "ms") return 1.0;
  if (unit == "seconds" || unit == "s") return 1e3;
  if (unit == "microseconds" || unit == "us") return 1e-3;
  if (unit == "nanoseconds" || unit == "ns") return 1e-6;
  throw error("unknown T4 time unit '" + unit + "'");
}

recorded_file read_t4(const json& root, const std::string& path) {
  recorded_file f;
  f.path = path;
  f.format = "t4";
  double to_ms = 1.0;
  if (root.contains("metadata") && root["metadata"].contains("timeunit"))
    to_ms = t4_unit_to_ms(root["metadata"]["timeunit"].get<std::string>());
  const auto& results = root.at("results");
  std::set<std::string> seen_names;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& res = results[i];
    recorded_record r;
    const auto& conf = res.at("configuration");
    for (const auto& [name, v] : conf.items()) {
      r.params.emplace(name, from_json(v));
      if (seen_names.insert(name).second) f.param_names.push_back(name);
    }
    trial& t = r.result;
    const auto& times = res.at("times");
    t.cost.compile = number_or(times, "compilation", 0) * to_ms / 1e3;
    t.cost.check = number_or(times, "validation", 0) * to_ms / 1e3;
    t.cost.framework = number_or(times, "framework", 0) * to_ms / 1e3;
    t.cost.strategy = number_or(times, "search_algorithm", 0) * to_ms / 1e3;
    std::vector<double> runs;
    bool non_finite_runs = false;
    if (times.contains("runtimes") && times["runtimes"].is_array())
      for (const auto& x : times["runtimes"])
        if (x.is_number()) {
          if (std::isfinite(x.get<double>()))
            runs.push_back(x.get<double>() * to_ms);
          else
            non_finite_runs = true;
        }
    double runs_sum = 0;
    for (double x : runs)
      runs_sum += x;
    t.cost.benchmark = number_or(times, "benchmark", runs_sum) * to_ms / 1e3;
    const std::string inv = res.value("invalidity", std::string("correct"));
    if (inv == "correct")
      t.st = status::ok;
    else if (inv == "compile")
      t.st = status::compile_failed;
    else if (inv == "runtime")
      t.st = status::launch_failed;
    else if (inv == "timeout")
      t.st = status::timeout;
    else if (inv == "correctness")
      t.st = status::wrong_result;
    else if (inv == "constraints")
      t.st = status::invalid;
    else
      throw error(path + ": results[" + std::to_string(i) + "] has unknown invalidity '" + inv + "'");
    if (t.st == status::ok) {
      if (runs.empty() && res.contains("measurements")) {
        for (const auto& m : res["measurements"])
          if (m.value("name", "") == "time" && m["value"].is_number() &&
              std::isfinite(m["value"].get<double>()))
            runs.push_back(m["value"].get<double>() * to_ms);
      }
      if (runs.empty() && non_finite_runs) {
        t.st = status::launch_failed;
        t.error = "recorded runtimes are not finite numbers";
        f.records.push_back(std::move(r));
        continue;
      }
      if (runs.empty())
        throw error(path + ": results[" + std::to_string(i) + "] is correct but has no runtimes");
      set_times(t, std::move(runs));
      if (res.contains("measurements"))
        for (const auto& m : res["measurements"])
          if (m.contains("name") && m.contains("value") && m["value"].is_number())
            t.metrics[m["name"].get<std::string>() == "time" ? "recorded_mean_time_ms"
                                                             : m["name"].get<std::string>()] =
                m["value"].get<double>();
    } else {
      t.error = "recorded invalidity: " + inv;
    }
    f.records.push_back(std::move(r));
  }
  return f;
}

// --- KTT ------------------------------------------------------------------------------------------
recorded_file read_ktt(const json& root, const std::string& path) {
  recorded_file f;
  f.path = path;
  f.format = "ktt";
  const auto& meta = root.at("Metadata");
  f.device_name = meta.value("Device", "");
  double to_ms = 1e-3;  // KTT default unit: microseconds
  if (meta.contains("TimeUnit")) {
    const auto u = meta["TimeUnit"].get<std::string>();
    if (u == "Microseconds")
      to_ms = 1e-3;
    else if (u == "Milliseconds")
      to_ms = 1.0;
    else if (u == "Nanoseconds")
      to_ms = 1e-6;
    else if (u == "Seconds")
      to_ms = 1e3;
    else
      throw error(path + ": unknown KTT TimeUnit '" + u + "'");
  }
  std::set<std::string> seen_names;
  const auto& results = root.at("Results");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& res = results[i];
    recorded_record r;
    for (const auto& p : res.at("Configuration")) {
      const auto name = p.at("Name").get<std::string>();
      r.params.emplace(name, from_json(p.at("Value")));
      if (seen_names.insert(name).second) f.param_names.push_back(name);
    }
    if (f.kernel_name.empty()) f.kernel_name = res.value("KernelName", "");
    trial& t = r.result;
    const auto st = res.value("Status", std::string("Ok"));
    // KTT's overhead fields: TotalOverhead covers compilation, data movement, validation and the searcher.
    t.cost.framework = number_or(res, "TotalOverhead", 0) * to_ms / 1e3;
    t.cost.check = 0;
    t.cost.benchmark = number_or(res, "TotalDuration", 0) * to_ms / 1e3;
    if (st == "Ok")
      t.st = status::ok;
    else if (st == "ComputationFailed")
      t.st = status::launch_failed;
    else if (st == "ValidationFailed")
      t.st = status::wrong_result;
    else if (st == "CompilationFailed")
      t.st = status::compile_failed;
    else if (st == "DeviceLimitsExceeded")
      t.st = status::invalid;
    else
      throw error(path + ": Results[" + std::to_string(i) + "] has unknown Status '" + st + "'");
    const auto& crs = res.contains("ComputationResults") ? res["ComputationResults"] : json::array();
    if (t.st == status::ok) {
      if (crs.empty())
        throw error(path + ": Results[" + std::to_string(i) + "] is Ok but has no ComputationResults");
      double duration = 0;
      for (const auto& cr : crs)
        duration += number_or(cr, "Duration", 0);
      set_times(t, {duration * to_ms});
    } else {
      t.error = "recorded status " + st;
    }
    for (const auto& cr : crs) {
      if (cr.contains("ProfilingData") && cr["ProfilingData"].contains("Counters"))
        for (const auto& c : cr["ProfilingData"]["Counters"])
          if (c.contains("Name") && c.contains("Value") && c["Value"].is_number())
            t.metrics[c["Name"].get<std::string>()] = c["Value"].get<double>();
      if (cr.contains("CompilationData")) {
        const auto& cd = cr["CompilationData"];
        if (cd.contains("RegistersCount")) t.metrics["static.registers"] = number_or(cd, "RegistersCount", 0);
        if (cd.contains("LocalMemorySize"))
          t.metrics["static.local_bytes"] = number_or(cd, "LocalMemorySize", 0);
        if (cd.contains("ConstantMemorySize"))
          t.metrics["static.const_bytes"] = number_or(cd, "ConstantMemorySize", 0);
        if (cd.contains("PrivateMemorySize"))
          t.metrics["static.private_bytes"] = number_or(cd, "PrivateMemorySize", 0);
      }
    }
    f.records.push_back(std::move(r));
  }
  return f;
}
}  // namespace

recorded_file read_recorded(const std::string& path) {
  json root;
  try {
    root = parse_json(read_file(path));
  } catch (const json::parse_error& e) {
    throw error(path + ": not valid JSON: " + e.what());
  }
  try {
    if (root.is_object() && root.contains("cache") && root.contains("tune_params_keys"))
      return read_kernel_tuner(root, path);
    if (root.is_object() && root.contains("results") &&
        (root.contains("schema_version") || root.contains("metadata")))
      return read_t4(root, path);
    if (root.is_object() && root.contains("Results") && root.contains("Metadata"))
      return read_ktt(root, path);
  } catch (const json::exception& e) {
    throw error(path + ": malformed record: " + e.what());
  }
  throw error(path + ": not a recognised recording (expected a Kernel Tuner cache, T4 output or KTT output)");
}

search_space recorded_space(const recorded_file& f) {
  std::vector<param> params;
  for (const auto& name : f.param_names) {
    std::vector<value> vals;
    if (auto it = f.param_values.find(name); it != f.param_values.end()) {
      vals = it->second;
    } else {
      for (const auto& r : f.records) {
        const auto& v = r.params.at(name);
        if (std::find(vals.begin(), vals.end(), v) == vals.end()) vals.push_back(v);
      }
      std::stable_sort(vals.begin(), vals.end(), [](const value& a, const value& b) {
        try {
          return value::compare(a, b) < 0;
        } catch (const error&) {
          return a.type() < b.type();
        }
      });
    }
    param_type t = param_type::integer;
    for (const auto& v : vals) {
      if (v.is_string() || v.is_list())
        t = param_type::string;
      else if (v.is_real() && t == param_type::integer)
        t = param_type::real;
    }
    params.push_back(make_param(name, t, vals));
  }
  search_space base(std::move(params), {});
  std::vector<config> valid;
  valid.reserve(f.records.size());
  for (const auto& r : f.records)
    valid.push_back(base.from_values(r.params));
  return base.restricted_to(std::move(valid));
}

long bound_records::find(const config& c) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), c,
                             [](const auto& e, const config& k) { return e.first < k; });
  if (it == entries.end() || it->first != c) return -1;
  return static_cast<long>(it->second);
}

bound_records bind_records(const recorded_file& f, const search_space& space) {
  bound_records b;
  b.entries.reserve(f.records.size());
  for (std::size_t i = 0; i < f.records.size(); ++i) {
    try {
      b.entries.emplace_back(space.from_values(f.records[i].params), i);
    } catch (const error& e) {
      if (b.unmatched++ == 0) b.first_unmatched = e.what();
    }
  }
  std::stable_sort(b.entries.begin(), b.entries.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const auto before = b.entries.size();
  b.entries.erase(std::unique(b.entries.begin(), b.entries.end(),
                              [](const auto& x, const auto& y) { return x.first == y.first; }),
                  b.entries.end());
  b.duplicates = before - b.entries.size();
  return b;
}

std::shared_ptr<const recorded_file> load_recorded_cached(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const recorded_file>> cache;
  std::lock_guard lk(mu);
  if (auto it = cache.find(path); it != cache.end())
    if (auto sp = it->second.lock()) return sp;
  auto sp = std::make_shared<const recorded_file>(read_recorded(path));
  cache[path] = sp;
  return sp;
}

}  // namespace kf
