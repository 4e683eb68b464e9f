#include "evaluators/mpi/wire.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kforge/error.hpp"

namespace kf::mpi {

namespace {
using json = nlohmann::json;

json number(double x) {
  if (std::isnan(x)) return nullptr;
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

// A field of `j` that must be present; `what` names the object in the error.
const json& field(const json& j, const char* key, const char* what) {
  if (!j.is_object() || !j.contains(key)) throw error(std::string(what) + " without \"" + key + "\"");
  return j.at(key);
}

double number_from(const json& j, const char* key, const char* what) {
  const json& v = field(j, key, what);
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  throw error(std::string(what) + ": \"" + key + "\" is not a number (" + v.dump() + ")");
}

double element(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

template <class T>
T get_as(const json& j, const char* key, const char* what) {
  const json& v = field(j, key, what);
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw error(std::string(what) + ": \"" + key + "\" has the wrong type (" + v.dump() + ")");
  }
}
}  // namespace

std::string_view to_string(tag t) noexcept {
  switch (t) {
    case tag::start:
      return "start";
    case tag::hello:
      return "hello";
    case tag::work:
      return "work";
    case tag::trials:
      return "trials";
    case tag::heartbeat:
      return "heartbeat";
    case tag::failed:
      return "failed";
    case tag::stop:
      return "stop";
    case tag::bye:
      return "bye";
    case tag::end:
      return "end";
  }
  return "?";
}

json to_json(const evaluation_request& r) {
  return {{"sequence", r.sequence}, {"batch", r.batch}, {"cfg", r.cfg}};
}

evaluation_request request_from_json(const json& j) {
  constexpr const char* what = "an evaluation request";
  evaluation_request r;
  r.sequence = get_as<std::uint64_t>(j, "sequence", what);
  r.batch = get_as<std::uint32_t>(j, "batch", what);
  r.cfg = get_as<config>(j, "cfg", what);
  return r;
}

json to_json(const trial& t) {
  json metrics = json::object();
  for (const auto& [k, v] : t.metrics)
    metrics[k] = number(v);
  json times = json::array();
  for (double x : t.times_ms)
    times.push_back(number(x));
  return {{"sequence", t.sequence},
          {"batch", t.batch},
          {"cfg", t.cfg},
          {"status", std::string(to_string(t.st))},
          {"time_ms", number(t.time_ms)},
          {"time_iqr_ms", number(t.time_iqr_ms)},
          {"time_min_ms", number(t.time_min_ms)},
          {"times_ms", std::move(times)},
          {"cost",
           {{"compile", t.cost.compile},
            {"check", t.cost.check},
            {"benchmark", t.cost.benchmark},
            {"profile", t.cost.profile},
            {"framework", t.cost.framework},
            {"strategy", t.cost.strategy}}},
          {"metrics", std::move(metrics)},
          {"error", t.error},
          {"device", t.device},
          {"sm_clock_mhz", number(t.sm_clock_mhz)},
          {"clock_s", t.clock_s},
          {"timestamp", t.timestamp}};
}

trial trial_from_json(const json& j) {
  constexpr const char* what = "a trial";
  trial t;
  t.sequence = get_as<std::uint64_t>(j, "sequence", what);
  t.batch = get_as<std::uint32_t>(j, "batch", what);
  t.cfg = get_as<config>(j, "cfg", what);
  const auto st = get_as<std::string>(j, "status", what);
  const auto parsed = status_from_string(st);
  if (!parsed) throw error("a trial with the unknown status \"" + st + "\"");
  t.st = *parsed;
  t.time_ms = number_from(j, "time_ms", what);
  t.time_iqr_ms = number_from(j, "time_iqr_ms", what);
  t.time_min_ms = number_from(j, "time_min_ms", what);
  const json& times = field(j, "times_ms", what);
  if (!times.is_array()) throw error("a trial whose \"times_ms\" is not a list");
  for (const auto& x : times)
    t.times_ms.push_back(element(x));
  constexpr const char* cost_what = "a trial's cost";
  const json& c = field(j, "cost", what);
  t.cost.compile = number_from(c, "compile", cost_what);
  t.cost.check = number_from(c, "check", cost_what);
  t.cost.benchmark = number_from(c, "benchmark", cost_what);
  t.cost.profile = number_from(c, "profile", cost_what);
  t.cost.framework = number_from(c, "framework", cost_what);
  t.cost.strategy = number_from(c, "strategy", cost_what);
  const json& m = field(j, "metrics", what);
  if (!m.is_object()) throw error("a trial whose \"metrics\" is not an object");
  for (const auto& [k, v] : m.items())
    t.metrics[k] = element(v);
  t.error = get_as<std::string>(j, "error", what);
  t.device = get_as<std::string>(j, "device", what);
  t.sm_clock_mhz = number_from(j, "sm_clock_mhz", what);
  t.clock_s = number_from(j, "clock_s", what);
  t.timestamp = get_as<std::string>(j, "timestamp", what);
  return t;
}

std::vector<std::string> device_names(const json& describe) {
  std::vector<std::string> names;
  if (describe.is_object() && describe.contains("workers") && describe["workers"].is_array())
    for (const auto& w : describe["workers"])
      if (w.is_object() && w.contains("name") && w["name"].is_string() &&
          !w["name"].get<std::string>().empty())
        names.push_back(w["name"].get<std::string>());
  if (names.empty() && describe.is_object() && describe.contains("device") && describe["device"].is_string())
    names.push_back(describe["device"].get<std::string>());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

json parse_body(const std::string& body, tag kind, int source) {
  try {
    auto j = json::parse(body);
    if (!j.is_object()) throw error("not a JSON object");
    return j;
  } catch (const std::exception& e) {
    throw error("an unreadable " + std::string(to_string(kind)) + " message from rank " +
                std::to_string(source) + ": " + e.what());
  }
}

}  // namespace kf::mpi
