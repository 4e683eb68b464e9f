#include "kforge/run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kforge/error.hpp"
#include "kforge/run_folder.hpp"
#include "kforge/store.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

json member(const json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j[key] : json();
}

std::string string_member(const json& j, const char* key) {
  const auto v = member(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// Strategy, seed, budget and batch size as run: the "run" record, else (older stores) the fingerprint
// and the config.
void read_identity(const run_store& store, run_summary& r) {
  const auto run = store.meta("run");
  const auto fp = store.meta("fingerprint");
  const auto config = store.meta("config");
  const auto strategy = run.is_object() ? member(run, "strategy") : member(fp, "strategy");
  r.strategy = string_member(strategy, "type");
  r.strategy_params = member(strategy, "params");
  const auto evaluator = run.is_object() ? member(run, "evaluator") : member(fp, "evaluator");
  r.evaluator = string_member(evaluator, "type");
  r.seed = run.is_object() ? member(run, "seed") : member(fp, "seed");
  r.budget = run.is_object() ? member(run, "budget") : member(config, "budget");
  r.batch_size = run.is_object() ? member(run, "batch_size") : member(fp, "batch_size");
  r.name = string_member(json{{"n", store.meta("name")}}, "n");
  r.config_file = string_member(json{{"f", store.meta("config_file")}}, "f");
  r.evaluator_meta = store.meta("evaluator");
  if (r.evaluator.empty()) r.evaluator = string_member(r.evaluator_meta, "type");
  r.recorded_optimum = member(r.evaluator_meta, "recorded_optimum");
}

// What became of the run: the holder of its lock, else its records.
void read_state(const run_store& store, run_summary& r) {
  const auto finished = store.meta("finished"), interrupted = store.meta("interrupted"),
             failed = store.meta("failed");
  if (const auto pid = run_lock::holder(r.folder)) {
    r.state = "running";
    r.state_detail = "pid " + std::to_string(*pid);
  } else if (finished.is_object()) {
    r.state = "finished";
    r.state_detail = string_member(finished, "reason");
  } else if (interrupted.is_object()) {
    r.state = "interrupted";
    r.state_detail = "Ctrl-C";
  } else if (failed.is_object()) {
    r.state = "failed";
    r.state_detail = excerpt(string_member(failed, "error"), 300);
  } else if (r.trials.empty()) {
    r.state = "never started";
    r.state_detail = "no trial was recorded";
  } else {
    r.state = "stopped";
    r.state_detail = "killed or crashed: no end was recorded";
  }
}

void compute_convergence(run_summary& r) {
  std::vector<std::size_t> order(r.trials.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return r.trials[a].clock_s < r.trials[b].clock_s; });
  convergence_point p;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& t = r.trials[order[k]];
    p.trials = k + 1;
    p.clock_s = std::max(p.clock_s, t.clock_s);
    if (t.ok() && !(t.time_ms >= p.best_ms)) {
      p.best_ms = t.time_ms;
      p.best_sequence = t.sequence;
      p.best_clock_s = p.clock_s;
    }
    r.convergence.push_back(p);
  }
}
}  // namespace

run_summary read_run(const std::filesystem::path& folder) {
  const run_store store(folder, store_access::read_only);
  run_summary r;
  r.folder = folder;
  r.space = stored_space(store);
  r.trials = store.trials();
  read_identity(store, r);
  for (std::size_t i = 0; i < r.trials.size(); ++i) {
    const auto& t = r.trials[i];
    ++r.by_status[static_cast<std::size_t>(t.st)];
    if (t.ok() && (!r.best || t.time_ms < r.trials[*r.best].time_ms)) r.best = i;
  }
  read_state(store, r);
  compute_convergence(r);
  return r;
}

std::optional<convergence_point> first_within(const run_summary& r, double target_ms, double fraction) {
  for (const auto& p : r.convergence)
    if (p.best_ms <= target_ms / fraction) return p;
  return std::nullopt;
}

std::vector<std::pair<status, std::vector<std::string>>> failure_examples(const run_summary& r,
                                                                          std::size_t per_status,
                                                                          std::size_t max_chars) {
  std::vector<std::pair<status, std::vector<std::string>>> out;
  for (std::size_t s = 0; s < status_count; ++s) {
    if (s == static_cast<std::size_t>(status::ok) || r.by_status[s] == 0) continue;
    std::vector<std::string> lines;
    for (const auto& t : r.trials) {
      if (static_cast<std::size_t>(t.st) != s) continue;
      std::string why = t.error.empty() ? "(no message)" : t.error;
      std::replace(why.begin(), why.end(), '\n', ' ');
      lines.push_back(excerpt(
          "trial " + std::to_string(t.sequence) + " " + r.space.describe(t.cfg) + ": " + why, max_chars));
      if (lines.size() == per_status) break;
    }
    out.emplace_back(static_cast<status>(s), std::move(lines));
  }
  return out;
}

json summary_json(const run_summary& r) {
  json by_status = json::object();
  for (std::size_t s = 0; s < status_count; ++s)
    if (r.by_status[s]) by_status[std::string(to_string(static_cast<status>(s)))] = r.by_status[s];
  json j = {{"folder", r.folder.string()},
            {"name", r.name},
            {"config_file", r.config_file},
            {"strategy", {{"type", r.strategy}, {"params", r.strategy_params}}},
            {"evaluator", r.evaluator_meta.is_null() ? json{{"type", r.evaluator}} : r.evaluator_meta},
            {"seed", r.seed},
            {"budget", r.budget},
            {"batch_size", r.batch_size},
            {"state", r.state},
            {"state_detail", r.state_detail},
            {"trials", r.trials.size()},
            {"by_status", by_status},
            {"best", nullptr},
            {"recorded_optimum", r.recorded_optimum}};
  if (const auto* b = r.best_trial()) {
    j["best"] = {{"sequence", b->sequence},
                 {"time_ms", b->time_ms},
                 {"time_iqr_ms", std::isnan(b->time_iqr_ms) ? json() : json(b->time_iqr_ms)},
                 {"clock_s", b->clock_s},
                 {"configuration", r.space.to_json(b->cfg)}};
    const auto opt = member(r.recorded_optimum, "time_ms");
    if (opt.is_number()) j["best"]["over_recorded_optimum"] = b->time_ms / opt.get<double>();
  }
  json failures = json::object();
  for (const auto& [s, lines] : failure_examples(r))
    failures[std::string(to_string(s))] = lines;
  j["failures"] = failures;
  json conv = json::array();
  for (std::size_t i = 0; i < r.convergence.size(); ++i) {
    const auto& p = r.convergence[i];
    const bool changed = i == 0 || p.best_sequence != r.convergence[i - 1].best_sequence ||
                         std::isnan(r.convergence[i - 1].best_ms) != std::isnan(p.best_ms);
    if (!changed && i + 1 != r.convergence.size()) continue;
    conv.push_back({{"trials", p.trials},
                    {"clock_s", p.clock_s},
                    {"best_ms", std::isnan(p.best_ms) ? json() : json(p.best_ms)},
                    {"best_sequence", std::isnan(p.best_ms) ? json() : json(p.best_sequence)},
                    {"best_clock_s", std::isnan(p.best_clock_s) ? json() : json(p.best_clock_s)}});
  }
  j["convergence"] = conv;
  return j;
}

std::vector<run_summary> read_runs(const std::filesystem::path& root) {
  std::vector<run_summary> out;
  std::error_code ec;
  if (std::filesystem::exists(root / "run.sqlite", ec)) {
    try {
      out.push_back(read_run(root));
    } catch (const error&) {
    }
  }
  std::vector<std::filesystem::path> folders;
  if (std::filesystem::is_directory(root, ec))
    for (const auto& e : std::filesystem::directory_iterator(root, ec))
      if (e.is_directory(ec) && std::filesystem::exists(e.path() / "run.sqlite", ec))
        folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  for (const auto& f : folders) {
    try {
      out.push_back(read_run(f));
    } catch (const error&) {
      continue;  // not a readable run
    }
  }
  return out;
}

}  // namespace kf
