#include "evaluators/cuda/protocol.hpp"

#include <algorithm>
#include <cmath>

#include "kforge/error.hpp"

namespace kf::gpu {

namespace {
using json = nlohmann::json;

json num(double x) {
  return std::isnan(x) ? json(nullptr) : json(x);
}
double num_of(const json& j) {
  return j.is_number() ? j.get<double>() : std::nan("");
}

json geometry_json(const launch_geometry& g) {
  return {{"grid", g.grid}, {"block", g.block}, {"shared_bytes", g.shared_bytes}};
}
launch_geometry geometry_of(const json& j) {
  launch_geometry g;
  g.grid = j.at("grid").get<std::array<std::uint32_t, 3>>();
  g.block = j.at("block").get<std::array<std::uint32_t, 3>>();
  g.shared_bytes = j.at("shared_bytes").get<std::uint32_t>();
  return g;
}

json arg_json(const resolved_arg& a) {
  json j = {{"name", a.name}, {"buffer", a.buffer}, {"dtype", std::string(to_string(a.type))}};
  if (!a.param) j["param"] = false;
  if (a.constant) j["constant"] = true;
  if (!a.compare) j["compare"] = false;
  if (a.tensor_map) {
    const auto& t = *a.tensor_map;
    const auto r = t.rank;
    j["tensor_map"] = {
        {"buffer", t.buffer},
        {"rank", r},
        {"dims", std::vector<std::uint64_t>(t.dims.begin(), t.dims.begin() + r)},
        {"strides", std::vector<std::uint64_t>(t.strides.begin(), t.strides.begin() + (r ? r - 1 : 0))},
        {"box", std::vector<std::uint32_t>(t.box.begin(), t.box.begin() + r)},
        {"swizzle", t.swizzle},
        {"l2_promotion", t.l2_promotion},
        {"oob_nan", t.oob_nan},
        {"enabled", t.enabled}};
  } else if (a.buffer) {
    j["count"] = a.count;
    j["fill"] = {{"kind", static_cast<int>(a.fill.k)}, {"a", a.fill.a}, {"b", a.fill.b}};
    j["role"] = static_cast<int>(a.role);
  } else {
    j["f"] = a.scalar;
    j["i"] = a.scalar_int;
  }
  return j;
}
resolved_arg arg_of(const json& j) {
  resolved_arg a;
  a.name = j.value("name", "");
  a.buffer = j.at("buffer").get<bool>();
  a.param = j.value("param", true);
  a.constant = j.value("constant", false);
  a.compare = j.value("compare", true);
  auto t = dtype_from_string(j.at("dtype").get<std::string>());
  if (!t) throw error("protocol: unknown dtype " + j.at("dtype").dump());
  a.type = *t;
  if (const auto tm = j.find("tensor_map"); tm != j.end()) {
    tensor_map_layout m;
    m.buffer = tm->at("buffer").get<std::size_t>();
    m.rank = tm->at("rank").get<std::uint32_t>();
    if (m.rank > 5) throw error("protocol: tensor map of rank " + std::to_string(m.rank));
    const auto dims = tm->at("dims").get<std::vector<std::uint64_t>>();
    const auto strides = tm->at("strides").get<std::vector<std::uint64_t>>();
    const auto box = tm->at("box").get<std::vector<std::uint32_t>>();
    if (dims.size() != m.rank || box.size() != m.rank ||
        strides.size() + 1 != std::max<std::size_t>(m.rank, 1))
      throw error("protocol: tensor map " + a.name + " has dims, strides or box of the wrong length");
    std::copy(dims.begin(), dims.end(), m.dims.begin());
    std::copy(strides.begin(), strides.end(), m.strides.begin());
    std::copy(box.begin(), box.end(), m.box.begin());
    m.swizzle = tm->at("swizzle").get<std::uint32_t>();
    m.l2_promotion = tm->at("l2_promotion").get<std::uint32_t>();
    m.oob_nan = tm->at("oob_nan").get<bool>();
    m.enabled = tm->at("enabled").get<bool>();
    a.tensor_map = m;
  } else if (a.buffer) {
    a.count = j.at("count").get<std::uint64_t>();
    a.fill.k = static_cast<fill_spec::kind>(j.at("fill").at("kind").get<int>());
    a.fill.a = j.at("fill").at("a").get<double>();
    a.fill.b = j.at("fill").at("b").get<double>();
    a.role = static_cast<arg_role>(j.at("role").get<int>());
  } else {
    a.scalar = j.at("f").get<double>();
    a.scalar_int = j.at("i").get<std::int64_t>();
  }
  return a;
}
}  // namespace

json to_json(const evaluate_request& r) {
  json shapes = json::array();
  for (const auto& s : r.shapes) {
    json args = json::array();
    for (const auto& a : s.args)
      args.push_back(arg_json(a));
    shapes.push_back({{"args", args},
                      {"candidate", geometry_json(s.candidate)},
                      {"reference", s.reference ? geometry_json(*s.reference) : json(nullptr)},
                      {"check", s.check},
                      {"time", s.time},
                      {"profile", s.profile},
                      {"seed", s.seed}});
    if (s.candidate_module)
      shapes.back()["candidate_module"] = {{"path", s.candidate_module->path}, {"function", s.candidate_module->function}};
    if (s.reference_module)
      shapes.back()["reference_module"] = {{"path", s.reference_module->path}, {"function", s.reference_module->function}};
  }
  json tol = json::object();
  for (const auto& [t, v] : r.tolerances)
    tol[std::string(to_string(t))] = {{"rel", v.rel}, {"abs", v.abs}};
  return {{"op", "evaluate"},
          {"id", r.id},
          {"candidate", {{"path", r.candidate.path}, {"function", r.candidate.function}}},
          {"reference", r.reference ? json{{"path", r.reference->path}, {"function", r.reference->function}}
                                    : json(nullptr)},
          {"shapes", shapes},
          {"tolerances", tol},
          {"timing",
           {{"warmup", r.timing.warmup},
            {"min_repeats", r.timing.min_repeats},
            {"max_repeats", r.timing.max_repeats},
            {"target_rel_ci", r.timing.target_rel_ci},
            {"max_seconds", r.timing.max_seconds},
            {"flush_l2", r.timing.flush_l2},
            {"timer", r.timing.timer},
            {"min_batch_us", r.timing.min_batch_us}}},
          {"watchdog", {{"min_ms", r.watchdog.min_ms}, {"factor", r.watchdog.factor}}},
          {"metrics", r.metrics},
          {"deep_metrics", r.deep_metrics},
          {"deep_if_faster_than_ms", r.deep_if_faster_than_ms}};
}

evaluate_request request_from_json(const json& j) {
  evaluate_request r;
  r.id = j.at("id").get<std::uint64_t>();
  r.candidate = {j.at("candidate").at("path").get<std::string>(),
                 j.at("candidate").at("function").get<std::string>()};
  if (const auto& ref = j.at("reference"); !ref.is_null())
    r.reference = module_ref{ref.at("path").get<std::string>(), ref.at("function").get<std::string>()};
  for (const auto& s : j.at("shapes")) {
    shape_job sj;
    for (const auto& a : s.at("args"))
      sj.args.push_back(arg_of(a));
    sj.candidate = geometry_of(s.at("candidate"));
    if (!s.at("reference").is_null()) sj.reference = geometry_of(s.at("reference"));
    sj.check = s.at("check").get<bool>();
    sj.time = s.at("time").get<bool>();
    sj.profile = s.at("profile").get<bool>();
    sj.seed = s.at("seed").get<std::uint64_t>();
    if (s.contains("candidate_module"))
      sj.candidate_module = module_ref{s["candidate_module"].at("path").get<std::string>(),
                                       s["candidate_module"].at("function").get<std::string>()};
    if (s.contains("reference_module"))
      sj.reference_module = module_ref{s["reference_module"].at("path").get<std::string>(),
                                       s["reference_module"].at("function").get<std::string>()};
    r.shapes.push_back(std::move(sj));
  }
  for (const auto& [name, v] : j.at("tolerances").items()) {
    auto t = dtype_from_string(name);
    if (!t) throw error("protocol: unknown dtype " + name);
    r.tolerances[*t] = {v.at("rel").get<double>(), v.at("abs").get<double>()};
  }
  const auto& t = j.at("timing");
  r.timing.warmup = t.at("warmup").get<int>();
  r.timing.min_repeats = t.at("min_repeats").get<int>();
  r.timing.max_repeats = t.at("max_repeats").get<int>();
  r.timing.target_rel_ci = t.at("target_rel_ci").get<double>();
  r.timing.max_seconds = t.at("max_seconds").get<double>();
  r.timing.flush_l2 = t.at("flush_l2").get<bool>();
  r.timing.timer = t.at("timer").get<std::string>();
  r.timing.min_batch_us = t.at("min_batch_us").get<double>();
  r.watchdog.min_ms = j.at("watchdog").at("min_ms").get<double>();
  r.watchdog.factor = j.at("watchdog").at("factor").get<double>();
  r.metrics = j.at("metrics").get<std::vector<std::string>>();
  r.deep_metrics = j.value("deep_metrics", std::vector<std::string>{});
  r.deep_if_faster_than_ms = j.value("deep_if_faster_than_ms", 0.0);
  return r;
}

json to_json(const evaluate_response& r) {
  json m = json::object();
  for (const auto& [k, v] : r.metrics)
    m[k] = num(v);
  json times = json::array();
  for (double x : r.times_ms)
    times.push_back(num(x));
  return {{"id", r.id},
          {"status", std::string(to_string(r.st))},
          {"error", r.error},
          {"times_ms", times},
          {"sm_clock_mhz", num(r.sm_clock_mhz)},
          {"metrics", m},
          {"load_s", r.load_s},
          {"check_s", r.check_s},
          {"benchmark_s", r.benchmark_s},
          {"profile_s", r.profile_s},
          {"fatal", r.fatal},
          {"notes", r.notes}};
}

evaluate_response response_from_json(const json& j) {
  evaluate_response r;
  r.id = j.at("id").get<std::uint64_t>();
  auto s = status_from_string(j.at("status").get<std::string>());
  if (!s) throw error("protocol: unknown status " + j.at("status").dump());
  r.st = *s;
  r.error = j.value("error", "");
  for (const auto& x : j.at("times_ms"))
    r.times_ms.push_back(num_of(x));
  r.sm_clock_mhz = num_of(j.at("sm_clock_mhz"));
  for (const auto& [k, v] : j.at("metrics").items())
    r.metrics[k] = num_of(v);
  r.load_s = j.value("load_s", 0.0);
  r.check_s = j.value("check_s", 0.0);
  r.benchmark_s = j.value("benchmark_s", 0.0);
  r.profile_s = j.value("profile_s", 0.0);
  r.fatal = j.value("fatal", false);
  r.notes = j.value("notes", "");
  return r;
}

json to_json(const worker_info& w) {
  const auto& d = w.limits;
  return {{"device", w.device},
          {"name", w.name},
          {"cc", {w.cc_major, w.cc_minor}},
          {"sm_count", w.sm_count},
          {"memory_bytes", w.memory_bytes},
          {"l2_bytes", w.l2_bytes},
          {"driver_version", w.driver_version},
          {"pci_bus_id", w.pci_bus_id},
          {"profiling", w.profiling},
          {"profiling_note", w.profiling_note},
          {"max_sm_clock_mhz", w.max_sm_clock_mhz},
          {"limits",
           {{"max_threads_per_sm", d.max_threads_per_sm},
            {"max_blocks_per_sm", d.max_blocks_per_sm},
            {"registers_per_sm", d.registers_per_sm},
            {"max_registers_per_block", d.max_registers_per_block},
            {"shared_per_sm", d.shared_per_sm},
            {"shared_per_block_optin", d.shared_per_block_optin},
            {"shared_reserved_per_block", d.shared_reserved_per_block},
            {"warp_size", d.warp_size}}}};
}

worker_info worker_info_from_json(const json& j) {
  worker_info w;
  w.device = j.at("device").get<int>();
  w.name = j.at("name").get<std::string>();
  w.cc_major = j.at("cc")[0].get<int>();
  w.cc_minor = j.at("cc")[1].get<int>();
  w.sm_count = j.at("sm_count").get<int>();
  w.memory_bytes = j.at("memory_bytes").get<std::uint64_t>();
  w.l2_bytes = j.at("l2_bytes").get<std::uint64_t>();
  w.driver_version = j.at("driver_version").get<int>();
  w.pci_bus_id = j.value("pci_bus_id", "");
  w.profiling = j.at("profiling").get<bool>();
  w.profiling_note = j.value("profiling_note", "");
  w.max_sm_clock_mhz = j.value("max_sm_clock_mhz", 0.0);
  const auto& l = j.at("limits");
  auto& d = w.limits;
  d.cc_major = w.cc_major;
  d.cc_minor = w.cc_minor;
  d.sm_count = w.sm_count;
  d.max_threads_per_sm = l.at("max_threads_per_sm").get<int>();
  d.max_blocks_per_sm = l.at("max_blocks_per_sm").get<int>();
  d.registers_per_sm = l.at("registers_per_sm").get<int>();
  d.max_registers_per_block = l.at("max_registers_per_block").get<int>();
  d.shared_per_sm = l.at("shared_per_sm").get<int>();
  d.shared_per_block_optin = l.at("shared_per_block_optin").get<int>();
  d.shared_reserved_per_block = l.at("shared_reserved_per_block").get<int>();
  d.warp_size = l.at("warp_size").get<int>();
  return w;
}

}  // namespace kf::gpu
