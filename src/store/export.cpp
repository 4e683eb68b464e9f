#include <cmath>
#include <ostream>
#include <set>
#include <sstream>

#include "kforge/error.hpp"
#include "kforge/store.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

json num(double x) {
  return std::isnan(x) ? json(nullptr) : json(x);
}

// Kernel Tuner's `time` (and the `time` measurement of the T4 files it writes): the mean of the timed
// runs. kforge's objective, time_ms, is their median; exports carry both, each under its own name.
double mean_time_ms(const trial& t) {
  double sum = 0;
  int n = 0;
  for (double x : t.times_ms)
    if (!std::isnan(x)) sum += x, ++n;
  return n ? sum / n : t.time_ms;
}

json trial_json(const trial& t, const search_space& space) {
  json m = json::object();
  for (const auto& [k, v] : t.metrics)
    m[k] = num(v);
  json times = json::array();
  for (double x : t.times_ms)
    times.push_back(num(x));
  return {{"sequence", t.sequence},
          {"batch", t.batch},
          {"configuration", space.to_json(t.cfg)},
          {"status", std::string(to_string(t.st))},
          {"time_ms", num(t.time_ms)},
          {"time_iqr_ms", num(t.time_iqr_ms)},
          {"time_min_ms", num(t.time_min_ms)},
          {"times_ms", times},
          {"cost_s",
           {{"compile", t.cost.compile},
            {"check", t.cost.check},
            {"benchmark", t.cost.benchmark},
            {"profile", t.cost.profile},
            {"framework", t.cost.framework},
            {"strategy", t.cost.strategy}}},
          {"metrics", m},
          {"error", t.error},
          {"device", t.device},
          {"sm_clock_mhz", num(t.sm_clock_mhz)},
          {"clock_s", t.clock_s},
          {"timestamp", t.timestamp}};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_num(double x) {
  if (std::isnan(x)) return "";
  std::ostringstream ss;
  ss.precision(17);
  ss << x;
  return ss.str();
}

const char* t4_invalidity(status s) {
  switch (s) {
    case status::ok:
      return "correct";
    case status::invalid:
      return "constraints";
    case status::compile_failed:
      return "compile";
    case status::launch_failed:
      return "runtime";
    case status::wrong_result:
      return "correctness";
    case status::timeout:
      return "timeout";
    case status::crashed:
      return "runtime";
  }
  return "runtime";
}

const char* kt_failure(status s) {
  switch (s) {
    case status::invalid:
      return "InvalidConfig";
    case status::compile_failed:
      return "CompilationFailedConfig";
    default:
      return "RuntimeFailedConfig";
  }
}

// T4 output as Kernel Tuner writes it (kernel_tuner.file_utils.get_t4_results): per result a timestamp,
// the configuration, times in ms, invalidity, measurements and objectives. The `time` measurement is
// the mean of the runtimes (Kernel Tuner's definition); `time_median` is kforge's objective.
void write_t4(const std::vector<trial>& trials, const search_space& space, std::ostream& out,
              const json& run_meta) {
  json results = json::array();
  for (const auto& t : trials) {
    json runtimes = json::array();
    for (double x : t.times_ms)
      runtimes.push_back(num(x));
    json measurements = json::array();
    if (t.ok()) {
      measurements.push_back({{"name", "time"}, {"value", mean_time_ms(t)}, {"unit", "ms"}});
      measurements.push_back({{"name", "time_median"}, {"value", t.time_ms}, {"unit", "ms"}});
    }
    for (const auto& [k, v] : t.metrics)
      if (!std::isnan(v)) measurements.push_back({{"name", k}, {"value", v}, {"unit", ""}});
    json r = {{"configuration", space.to_json(t.cfg)},
              {"times",
               {{"compilation", t.cost.compile * 1e3},
                {"framework", (t.cost.framework + t.cost.profile) * 1e3},
                {"search_algorithm", t.cost.strategy * 1e3},
                {"validation", t.cost.check * 1e3},
                {"benchmark", t.cost.benchmark * 1e3},
                {"runtimes", runtimes}}},
              {"invalidity", t4_invalidity(t.st)},
              {"correctness", t.st == status::wrong_result ? 0 : 1},
              {"measurements", measurements},
              {"objectives", json::array({"time"})}};
    if (!t.timestamp.empty()) r["timestamp"] = t.timestamp;
    results.push_back(std::move(r));
  }
  json doc = {{"schema_version", "1.0.0"},
              {"metadata",
               {{"timeunit", "milliseconds"},
                {"time_definitions",
                 {{"time", "mean of the runtimes (Kernel Tuner's definition)"},
                  {"time_median", "median of the runtimes (kforge's objective)"}}}}},
              {"results", results}};
  if (!run_meta.is_null()) doc["metadata"]["kforge"] = run_meta;
  out << doc.dump(1) << '\n';
}

// A Kernel Tuner cache file in the layout Kernel Tuner itself writes (kernel_tuner.util.process_cache
// and store_cache): the header fields in its order with `cache` last, one record per line, closed by
// "}\n}". Kernel Tuner's reader recognises a finished file by that ending; any other ending is taken
// for an unfinished file and "repaired". `time` is the mean of the timed runs (Kernel Tuner's
// definition) and `time_median` kforge's objective. problem_size is written when the run knows it.
void write_kernel_tuner(const std::vector<trial>& trials, const search_space& space, std::ostream& out,
                        const json& run_meta) {
  using ordered = nlohmann::ordered_json;
  const auto meta_string = [&](const char* key) {
    return run_meta.is_object() && run_meta.contains(key) && run_meta[key].is_string()
               ? run_meta[key].get<std::string>()
               : std::string();
  };
  ordered header;
  header["device_name"] = meta_string("device");
  header["kernel_name"] = meta_string("kernel");
  if (run_meta.is_object() && run_meta.contains("problem_size") && !run_meta["problem_size"].is_null())
    header["problem_size"] = ordered(run_meta["problem_size"]);
  ordered keys = ordered::array(), tune_params = ordered::object();
  for (const auto& p : space.params()) {
    keys.push_back(p.name);
    ordered vals = ordered::array();
    for (const auto& v : p.values)
      vals.push_back(ordered(to_json(v)));
    tune_params[p.name] = vals;
  }
  header["tune_params_keys"] = keys;
  header["tune_params"] = tune_params;
  header["objective"] = "time";
  header["time_definitions"] = {{"time", "mean of times (Kernel Tuner's definition)"},
                                {"time_median", "median of times (kforge's objective)"}};
  header["cache"] = ordered::object();
  // dump(0) puts every element on its own line, as Python's json.dumps(indent="") does; cut the empty
  // cache's closing "}\n}" and append the records.
  std::string text = header.dump(0);
  text.resize(text.size() - 3);
  out << text;
  bool first = true;
  for (const auto& t : trials) {
    ordered rec = ordered::object();
    for (std::size_t i = 0; i < space.dimension(); ++i)
      rec[space.params()[i].name] = ordered(to_json(space.value_of(t.cfg, i)));
    if (t.ok()) {
      rec["time"] = mean_time_ms(t);
      ordered times = ordered::array();
      for (double x : t.times_ms)
        times.push_back(ordered(num(x)));
      rec["times"] = times.empty() ? ordered::array({t.time_ms}) : times;
      rec["time_median"] = t.time_ms;
    } else {
      rec["time"] = kt_failure(t.st);
      rec["error"] = std::string(to_string(t.st)) + (t.error.empty() ? "" : ": " + t.error);
    }
    rec["compile_time"] = t.cost.compile * 1e3;
    rec["verification_time"] = t.cost.check * 1e3;
    rec["benchmark_time"] = t.cost.benchmark * 1e3;
    rec["framework_time"] = (t.cost.framework + t.cost.profile) * 1e3;
    rec["strategy_time"] = t.cost.strategy * 1e3;
    if (!t.timestamp.empty()) rec["timestamp"] = t.timestamp;
    for (const auto& [k, v] : t.metrics)
      if (!std::isnan(v) && !rec.contains(k)) rec[k] = v;
    out << (first ? "" : ",") << '\n' << ordered(space.key(t.cfg)).dump() << ": " << rec.dump();
    first = false;
  }
  out << "}\n}\n";
}
}  // namespace

std::optional<export_format> export_format_from_string(std::string_view s) {
  if (s == "jsonl") return export_format::jsonl;
  if (s == "csv") return export_format::csv;
  if (s == "t4") return export_format::t4;
  if (s == "kernel_tuner" || s == "kt" || s == "cache") return export_format::kernel_tuner;
  return std::nullopt;
}

void export_trials(const std::vector<trial>& trials, const search_space& space, export_format fmt,
                   std::ostream& out, const json& run_meta) {
  switch (fmt) {
    case export_format::jsonl:
      for (const auto& t : trials)
        out << trial_json(t, space).dump() << '\n';
      break;
    case export_format::csv: {
      std::set<std::string> metric_names;
      for (const auto& t : trials)
        for (const auto& [k, v] : t.metrics)
          metric_names.insert(k);
      out << "sequence,batch";
      for (const auto& p : space.params())
        out << ',' << csv_field(p.name);
      out << ",status,time_ms,time_iqr_ms,time_min_ms,cost_compile_s,cost_check_s,cost_benchmark_s,cost_"
             "profile_s,"
             "cost_framework_s,cost_strategy_s,clock_s,timestamp,sm_clock_mhz,device";
      for (const auto& m : metric_names)
        out << ',' << csv_field(m);
      out << ",error\n";
      for (const auto& t : trials) {
        out << t.sequence << ',' << t.batch;
        for (std::size_t i = 0; i < space.dimension(); ++i)
          out << ',' << csv_field(space.value_of(t.cfg, i).str());
        out << ',' << to_string(t.st) << ',' << csv_num(t.time_ms) << ',' << csv_num(t.time_iqr_ms) << ','
            << csv_num(t.time_min_ms) << ',' << csv_num(t.cost.compile) << ',' << csv_num(t.cost.check) << ','
            << csv_num(t.cost.benchmark) << ',' << csv_num(t.cost.profile) << ',' << csv_num(t.cost.framework)
            << ',' << csv_num(t.cost.strategy) << ',' << csv_num(t.clock_s) << ',' << csv_field(t.timestamp)
            << ',' << csv_num(t.sm_clock_mhz) << ',' << csv_field(t.device);
        for (const auto& m : metric_names) {
          auto v = t.metric(m);
          out << ',' << (v ? csv_num(*v) : std::string());
        }
        out << ',' << csv_field(t.error) << '\n';
      }
      break;
    }
    case export_format::t4:
      write_t4(trials, space, out, run_meta);
      break;
    case export_format::kernel_tuner:
      write_kernel_tuner(trials, space, out, run_meta);
      break;
  }
}

}  // namespace kf
