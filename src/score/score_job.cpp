#include "kforge/score_job.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/experiment_config.hpp"
#include "kforge/kforge.hpp"
#include "kforge/problem.hpp"
#include "kforge/transfer.hpp"
#include "kforge/evaluators/replay.hpp"

namespace kf {

namespace {
using json = nlohmann::json;
}

double score_table::mean_score(std::size_t s) const {
  double sum = 0;
  for (std::size_t i = 0; i < spaces.size(); ++i)
    sum += at(i, s).score.score;
  return spaces.empty() ? std::nan("") : sum / static_cast<double>(spaces.size());
}

score_job load_score_job(const std::string& path) {
  return parse_score_job(load_document(path));
}

score_job parse_score_job(const document& doc) {
  register_builtins();
  const auto& root = doc.root;
  if (!root.is_object()) doc.at("").fail("expected a mapping (spaces, strategies, seeds, ...)");
  static const std::set<std::string> known = {"spaces",     "strategies",    "seeds",
                                              "seed_base",  "cutoff_start",  "cutoff_end",
                                              "resolution", "budget_margin", "external",
                                              "plugins"};
  for (const auto& [k, v] : root.items())
    if (!known.count(k))
      doc.at(k).fail(
          "unknown key (expected spaces, strategies, seeds, seed_base, cutoff_start, cutoff_end, resolution, "
          "budget_margin, external, plugins)");
  score_job job;
  job.file = doc.file;
  (void)load_config_plugins(doc, "plugins");  // before the strategies: some may come from them
  if (!root.contains("spaces") || !root["spaces"].is_array() || root["spaces"].empty())
    doc.at("spaces").fail("expected a non-empty list of {name, recording, t1}");
  for (std::size_t i = 0; i < root["spaces"].size(); ++i) {
    const auto key = "spaces[" + std::to_string(i) + "]";
    const auto& s = root["spaces"][i];
    if (!s.is_object()) doc.at(key).fail("expected {name, recording, t1}");
    for (const auto& [k, v] : s.items())
      if (k != "name" && k != "recording" && k != "t1" && k != "transfer")
        doc.at(key + "." + k).fail("unknown key (expected name, recording, t1, transfer)");
    if (!s.contains("recording") || !s["recording"].is_string())
      doc.at(key + ".recording").fail("expected the path of a recorded space");
    score_space_spec sp;
    sp.recording = resolve_path(s["recording"].get<std::string>(), doc.base_dir);
    if (s.contains("t1")) {
      if (!s["t1"].is_string()) doc.at(key + ".t1").fail("expected the path of a T1 file");
      sp.t1 = resolve_path(s["t1"].get<std::string>(), doc.base_dir);
    }
    if (s.contains("transfer")) {
      if (!s["transfer"].is_array() || s["transfer"].empty())
        doc.at(key + ".transfer").fail("expected a non-empty list of recordings of the same kernel");
      for (std::size_t t = 0; t < s["transfer"].size(); ++t) {
        const auto tkey = key + ".transfer[" + std::to_string(t) + "]";
        if (!s["transfer"][t].is_string()) doc.at(tkey).fail("expected the path of a recording");
        sp.transfer.push_back(resolve_path(s["transfer"][t].get<std::string>(), doc.base_dir));
        if (!std::filesystem::is_regular_file(sp.transfer.back()))
          doc.at(tkey).fail("no such file: " + sp.transfer.back());
      }
    }
    sp.name = s.contains("name") && s["name"].is_string() ? s["name"].get<std::string>() : sp.recording;
    job.spaces.push_back(std::move(sp));
  }
  if (!root.contains("strategies") || !root["strategies"].is_array())
    doc.at("strategies").fail("expected a list of strategies (names or {type, params})");
  for (std::size_t i = 0; i < root["strategies"].size(); ++i) {
    const auto key = "strategies[" + std::to_string(i) + "]";
    const auto& s = root["strategies"][i];
    plugin_spec p;
    p.where = doc.at(key);
    bool transfer = false;
    if (s.is_string()) {
      p.type = s.get<std::string>();
    } else if (s.is_object() && s.contains("type") && s["type"].is_string()) {
      for (const auto& [k, v] : s.items())
        if (k != "type" && k != "params" && k != "transfer")
          doc.at(key + "." + k).fail("unknown key (expected type, params, transfer)");
      p.type = s["type"].get<std::string>();
      p.params = s.value("params", json::object());
      if (s.contains("transfer")) {
        if (!s["transfer"].is_boolean()) doc.at(key + ".transfer").fail("expected true or false");
        transfer = s["transfer"].get<bool>();
      }
    } else {
      p.where.fail("expected a strategy name or {type, params, transfer}");
    }
    const bool takes = strategy_registry().create(p).accepts_transfer();
    if (transfer && !takes)
      doc.at(key + ".transfer").fail("strategy '" + p.type + "' does not use transfer records");
    job.strategies.push_back(std::move(p));
    job.strategy_transfer.push_back(transfer);
  }
  auto number = [&](const char* k, double lo, double hi, bool integer) -> std::optional<double> {
    if (!root.contains(k)) return std::nullopt;
    const auto& v = root[k];
    if (!v.is_number() || (integer && !v.is_number_integer()))
      doc.at(k).fail(std::string("expected ") + (integer ? "an integer" : "a number") + ", got " +
                     describe_json(v));
    const double x = v.get<double>();
    if (x < lo || x > hi)
      doc.at(k).fail("expected a value in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " +
                     describe_json(v));
    return x;
  };
  if (auto x = number("seeds", 1, 1e6, true)) job.seeds = static_cast<std::size_t>(*x);
  if (auto x = number("seed_base", 0, 1e18, true)) job.seed_base = static_cast<std::uint64_t>(*x);
  if (auto x = number("cutoff_start", 0, 1, false)) job.settings.cutoff_start = *x;
  if (auto x = number("cutoff_end", 0, 1, false)) job.settings.cutoff_end = *x;
  if (auto x = number("resolution", 2, 1e6, true)) job.settings.resolution = static_cast<std::size_t>(*x);
  if (auto x = number("budget_margin", 0, 10, false)) job.budget_margin = *x;
  if (job.settings.cutoff_start >= job.settings.cutoff_end)
    doc.at("cutoff_start").fail("must be below cutoff_end");
  for (std::size_t i = 0; i < job.strategies.size(); ++i) {
    if (!job.strategy_transfer[i]) continue;
    for (std::size_t k = 0; k < job.spaces.size(); ++k)
      if (job.spaces[k].transfer.empty())
        doc.at("spaces[" + std::to_string(k) + "]")
            .fail("strategies[" + std::to_string(i) + "] asks for transfer, but this space names no transfer recordings");
  }
  if (root.contains("external")) {
    if (!root["external"].is_array()) doc.at("external").fail("expected a list of files");
    for (std::size_t i = 0; i < root["external"].size(); ++i) {
      if (!root["external"][i].is_string())
        doc.at("external[" + std::to_string(i) + "]").fail("expected a file path");
      job.external.push_back(resolve_path(root["external"][i].get<std::string>(), doc.base_dir));
    }
  }
  return job;
}

namespace {
// Traces of another tool's runs: each run's configurations in the order visited, replayed on the
// recording's costs and cut at the budget the way run_loop cuts kforge's runs.
std::vector<run_trace> external_traces(const std::vector<std::vector<std::string>>& runs,
                                       const recorded_file& rec, const search_space& space, double budget_s,
                                       const std::string& what) {
  const auto bound = bind_records(rec, space);
  std::map<std::string, std::size_t> by_key;
  for (const auto& [c, idx] : bound.entries)
    by_key.emplace(space.key(c), idx);
  std::vector<run_trace> out;
  for (const auto& run : runs) {
    run_trace trace;
    double clock = 0;
    for (const auto& key : run) {
      if (clock >= budget_s) break;
      auto it = by_key.find(key);
      if (it == by_key.end()) throw error(what + ": configuration " + key + " is not in the recording");
      const auto& r = rec.records[it->second].result;
      clock += r.cost.total();
      trial t;
      t.sequence = trace.size();
      t.st = r.st;
      t.time_ms = r.time_ms;
      t.clock_s = clock;
      trace.push_back(std::move(t));
    }
    out.push_back(std::move(trace));
  }
  return out;
}

// Mean evaluations per run and mean (best found / optimum) at the end of the budget.
void summarise_runs(const std::vector<run_trace>& runs, const space_statistics& stats, score_cell& cell) {
  double evals = 0, ratio = 0;
  for (const auto& r : runs) {
    evals += static_cast<double>(r.size());
    double best = INFINITY;
    for (const auto& t : r)
      if (t.ok()) best = std::min(best, t.time_ms);
    ratio += best / stats.optimum();
  }
  cell.mean_evaluations = evals / static_cast<double>(runs.size());
  cell.mean_best_over_opt = ratio / static_cast<double>(runs.size());
}
}  // namespace

score_table run_score_job(const score_job& job, const std::function<void(const score_cell&)>& progress) {
  register_builtins();
  score_table table;
  for (const auto& s : job.spaces)
    table.spaces.push_back(s.name);
  for (std::size_t i = 0; i < job.strategies.size(); ++i) {
    const auto& s = job.strategies[i];
    std::string label = s.type;
    if (s.params.is_object() && !s.params.empty()) label += s.params.dump();
    if (i < job.strategy_transfer.size() && job.strategy_transfer[i]) label += " +transfer";
    table.strategies.push_back(label);
  }
  // Other tools' strategies: every one must have runs for every space.
  std::vector<json> externals;
  std::vector<std::string> external_names;
  for (const auto& f : job.external) {
    json j;
    try {
      j = json::parse(read_file(f));
    } catch (const std::exception& e) {
      throw error("external runs " + f + ": " + e.what());
    }
    if (!j.contains("runs") || !j["runs"].is_object())
      throw error("external runs " + f + ": no 'runs' mapping");
    for (const auto& sp : job.spaces) {
      if (!j["runs"].contains(sp.name))
        throw error("external runs " + f + " have no runs for space " + sp.name);
      for (const auto& [name, runs] : j["runs"][sp.name].items())
        if (std::find(external_names.begin(), external_names.end(), name) == external_names.end())
          external_names.push_back(name);
    }
    externals.push_back(std::move(j));
  }
  for (const auto& n : external_names)
    table.strategies.push_back(n);
  for (const auto& sp : job.spaces) {
    const auto rec = load_recorded_cached(sp.recording);
    const space_statistics stats(*rec);
    problem prob;
    prob.space = sp.t1.empty() ? recorded_space(*rec) : load_t1(sp.t1).space;
    prob.source_kind = sp.t1.empty() ? "cache" : "t1";
    const double budget_s = stats.cutoff_point(job.settings.cutoff_end).time_s * (1 + job.budget_margin);
    std::shared_ptr<const transfer_data> transfer;  // loaded once per space, when a strategy asks
    for (std::size_t si = 0; si < job.strategies.size(); ++si) {
      const bool with_transfer = si < job.strategy_transfer.size() && job.strategy_transfer[si];
      if (with_transfer && !transfer)
        transfer = std::make_shared<const transfer_data>(load_transfer(sp.transfer, prob.space));
      std::vector<run_trace> runs(job.seeds);
      tbb::parallel_for(std::size_t{0}, job.seeds, [&](std::size_t r) {
        auto strat = strategy_registry().create(job.strategies[si]);
        strat.set_name(job.strategies[si].type);
        if (with_transfer) strat.set_transfer(transfer);
        evaluator eval(replay_evaluator(rec, prob.space));
        budget_spec b;
        b.simulated_seconds = budget_s;
        run_options o;
        o.use_store = false;
        auto res = run_loop(prob.space, strat, eval, b, job.seed_base + r, 1, nullptr, o);
        run_trace trace;
        trace.reserve(res.history.size());
        for (const auto& t : res.history.trials()) {
          trial slim;
          slim.sequence = t.sequence;
          slim.st = t.st;
          slim.time_ms = t.time_ms;
          slim.clock_s = t.clock_s;
          trace.push_back(std::move(slim));
        }
        runs[r] = std::move(trace);
      });
      score_cell cell;
      cell.space = sp.name;
      cell.strategy = table.strategies[si];
      cell.score = score_runs(stats, runs, job.settings);
      summarise_runs(runs, stats, cell);
      if (progress) progress(cell);
      table.cells.push_back(std::move(cell));
    }
    for (const auto& name : external_names) {
      std::vector<std::vector<std::string>> runs;
      for (const auto& j : externals)
        if (j["runs"][sp.name].contains(name))
          runs = j["runs"][sp.name][name].get<std::vector<std::vector<std::string>>>();
      if (runs.empty()) throw error("external strategy " + name + " has no runs for space " + sp.name);
      const auto traces = external_traces(runs, *rec, prob.space, budget_s, name + " on " + sp.name);
      score_cell cell;
      cell.space = sp.name;
      cell.strategy = name;
      cell.score = score_runs(stats, traces, job.settings);
      summarise_runs(traces, stats, cell);
      if (progress) progress(cell);
      table.cells.push_back(std::move(cell));
    }
  }
  return table;
}

std::string format_score_table(const score_table& t) {
  std::string out;
  char buf[256];
  std::size_t w = 24;
  for (const auto& s : t.spaces)
    w = std::max(w, s.size() + 2);
  std::snprintf(buf, sizeof buf, "%-*s", static_cast<int>(w), "space");
  out += buf;
  for (const auto& s : t.strategies) {
    std::snprintf(buf, sizeof buf, " | %-22s", s.substr(0, 22).c_str());
    out += buf;
  }
  out += "\n" + std::string(w, '-');
  for (std::size_t i = 0; i < t.strategies.size(); ++i)
    out += "-+-" + std::string(22, '-');
  out += "\n";
  for (std::size_t i = 0; i < t.spaces.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%-*s", static_cast<int>(w), t.spaces[i].c_str());
    out += buf;
    for (std::size_t j = 0; j < t.strategies.size(); ++j) {
      const auto& c = t.at(i, j);
      std::snprintf(buf, sizeof buf, " | %6.3f (%5.2f+-%4.2f)  ", c.score.score, c.score.per_run_mean,
                    c.score.per_run_std);
      out += buf;
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "%-*s", static_cast<int>(w), "mean");
  out += buf;
  for (std::size_t j = 0; j < t.strategies.size(); ++j) {
    std::snprintf(buf, sizeof buf, " | %6.3f                 ", t.mean_score(j));
    out += buf;
  }
  out +=
      "\n\nP = mean over the time range of the pooled curve (per-run mean +- std in brackets); 0 = random "
      "search, 1 = optimum\n";
  return out;
}

json score_table_json(const score_table& t) {
  json cells = json::array();
  for (const auto& c : t.cells) {
    cells.push_back({{"space", c.space},
                     {"strategy", c.strategy},
                     {"score", c.score.score},
                     {"per_run", c.score.per_run},
                     {"per_run_mean", c.score.per_run_mean},
                     {"per_run_std", c.score.per_run_std},
                     {"mean_evaluations", c.mean_evaluations},
                     {"mean_best_over_optimum", c.mean_best_over_opt},
                     {"real_stopping_fraction", c.score.real_stopping_fraction},
                     {"time_range_s", c.score.time_range},
                     {"p_curve", c.score.p_curve}});
  }
  json means = json::object();
  for (std::size_t j = 0; j < t.strategies.size(); ++j)
    means[t.strategies[j]] = t.mean_score(j);
  return {{"spaces", t.spaces}, {"strategies", t.strategies}, {"mean_score", means}, {"cells", cells}};
}

}  // namespace kf
