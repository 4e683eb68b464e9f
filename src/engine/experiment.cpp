#include "kforge/experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <ostream>
#include <set>

#include "kforge/error.hpp"
#include "kforge/kforge.hpp"

namespace kf {

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

plugin_spec read_plugin(const document& doc, const json& node, const std::string& key) {
  plugin_spec p;
  p.where = doc.at(key);
  if (node.is_string()) {
    p.type = node.get<std::string>();
    p.params = json::object();
    return p;
  }
  if (!node.is_object()) p.where.fail("expected {type: <name>, params: {...}} or a name");
  for (const auto& [k, v] : node.items())
    if (k != "type" && k != "params") doc.at(key + "." + k).fail("unknown key (expected type, params)");
  if (!node.contains("type") || !node["type"].is_string())
    doc.at(key + ".type").fail("expected the name of a registered " + key);
  p.type = node["type"].get<std::string>();
  p.params = node.value("params", json::object());
  if (p.params.is_null()) p.params = json::object();
  if (!p.params.is_object()) doc.at(key + ".params").fail("expected a mapping of options");
  return p;
}

std::optional<double> positive_number(const document& doc, const json& node, const std::string& key,
                                      bool integer) {
  if (!node.contains(key)) return std::nullopt;
  const auto& v = node.at(key);
  const auto loc = doc.at("budget." + key);
  if (!v.is_number() || v.is_boolean()) loc.fail("expected a positive number, got " + describe_json(v));
  const double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x)) loc.fail("expected a positive number, got " + describe_json(v));
  if (integer && (std::floor(x) != x || x > 1e15))
    loc.fail("expected a whole number, got " + describe_json(v));
  return x;
}
}  // namespace

std::string_view to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::evaluations:
      return "evaluation budget reached";
    case stop_reason::wall_time:
      return "wall-time budget reached";
    case stop_reason::simulated_time:
      return "simulated-time budget reached";
    case stop_reason::strategy_finished:
      return "strategy finished";
    case stop_reason::space_exhausted:
      return "no unmeasured configuration left";
  }
  return "?";
}

experiment_spec parse_experiment(const document& doc) {
  register_builtins();
  const auto& root = doc.root;
  if (!root.is_object())
    doc.at("").fail(
        "expected a mapping (name, problem, strategy, evaluator, budget, seed, output, batch_size)");
  static const std::set<std::string> known = {"name",   "problem", "strategy", "evaluator",
                                              "budget", "seed",    "output",   "batch_size"};
  for (const auto& [k, v] : root.items())
    if (!known.count(k))
      doc.at(k).fail(
          "unknown key (expected one of name, problem, strategy, evaluator, budget, seed, output, "
          "batch_size)");
  experiment_spec s;
  s.file = doc.file;
  s.base_dir = doc.base_dir;
  s.raw = root;
  if (root.contains("name")) {
    if (!root["name"].is_string())
      doc.at("name").fail("expected a string, got " + describe_json(root["name"]));
    s.name = root["name"].get<std::string>();
    check_name(s.name, doc.at("name"));  // it names the run folder
  } else {
    s.name = sanitized_name(std::filesystem::path(doc.file).stem().string());
  }
  if (!root.contains("problem"))
    doc.at("").fail(
        "missing key 'problem' (the space to search: {t1: file}, {cache: file} or {kernel: file})");
  s.prob = load_problem(doc, "problem");
  if (!root.contains("strategy")) doc.at("").fail("missing key 'strategy' ({type: <name>, params: {...}})");
  s.strategy = read_plugin(doc, root["strategy"], "strategy");
  {
    // Validate the options now, so that a bad config fails before anything runs.
    const auto e = strategy_registry().get(s.strategy.type, s.strategy.where);
    (void)e.make(options(e.options, s.strategy.params, s.strategy.where.child("params")));
  }
  if (!root.contains("evaluator"))
    doc.at("").fail("missing key 'evaluator' ({type: replay, params: {file: ...}})");
  s.evaluator = read_plugin(doc, root["evaluator"], "evaluator");
  {
    const auto e = evaluator_registry().get(s.evaluator.type, s.evaluator.where);
    (void)options(e.options, s.evaluator.params, s.evaluator.where.child("params"));
  }
  if (root.contains("budget")) {
    const auto& b = root["budget"];
    if (!b.is_object())
      doc.at("budget").fail("expected a mapping with evaluations, wall_time_s and/or simulated_time_s");
    for (const auto& [k, v] : b.items())
      if (k != "evaluations" && k != "wall_time_s" && k != "simulated_time_s")
        doc.at("budget." + k).fail("unknown key (expected evaluations, wall_time_s, simulated_time_s)");
    if (auto e = positive_number(doc, b, "evaluations", true))
      s.budget.evaluations = static_cast<std::size_t>(*e);
    s.budget.wall_seconds = positive_number(doc, b, "wall_time_s", false);
    s.budget.simulated_seconds = positive_number(doc, b, "simulated_time_s", false);
  }
  if (root.contains("seed")) s.seed = seed_value(root["seed"], doc.at("seed"));
  if (root.contains("batch_size")) {
    const auto& v = root["batch_size"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1'000'000)
      doc.at("batch_size").fail("expected a positive integer, got " + describe_json(v));
    s.batch_size = v.get<std::size_t>();
  }
  if (root.contains("output")) {
    if (!root["output"].is_string() || root["output"].get<std::string>().empty())
      doc.at("output").fail("expected a folder path");
    s.output = root["output"].get<std::string>();
  } else {
    // No output folder given: a fresh, timestamped one, so that running a config twice never collides.
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
    s.output = std::filesystem::path("runs") / (s.name + "-" + stamp);
  }
  return s;
}

experiment_spec load_experiment(const std::string& path) {
  return parse_experiment(load_document(path));
}

run_result run_loop(const search_space& space, strategy& strat, evaluator& eval, const budget_spec& budget,
                    std::uint64_t seed, std::size_t batch_size, run_store* store, const run_options& opts) {
  if (batch_size == 0) batch_size = 1;
  const auto t0 = clock_type::now();
  run_result res;
  auto& hist = res.history;
  strat.initialize(space, seed);
  const bool simulated = eval.simulated_clock();

  std::map<std::uint64_t, trial> stored;
  double clock_offset = 0;
  if (store) {
    for (auto& t : store->trials()) {
      clock_offset = std::max(clock_offset, t.clock_s);
      stored.emplace(t.sequence, std::move(t));
    }
    if (!stored.empty() && !opts.resume)
      throw error("run folder " + store->dir().string() + " already holds " + std::to_string(stored.size()) +
                  " trials: pass --resume to continue that run, or choose another output folder");
  }
  double sim_clock = 0;
  auto wall_clock = [&] { return clock_offset + seconds_since(t0); };

  std::uint64_t seq = 0;
  std::uint32_t batch_no = 0;
  while (true) {
    const std::size_t used = hist.size();
    if (budget.evaluations && used >= *budget.evaluations) {
      res.reason = stop_reason::evaluations;
      break;
    }
    if (budget.simulated_seconds && simulated && sim_clock >= *budget.simulated_seconds) {
      res.reason = stop_reason::simulated_time;
      break;
    }
    if (budget.wall_seconds && stored.empty() && wall_clock() >= *budget.wall_seconds) {
      res.reason = stop_reason::wall_time;
      break;
    }
    std::optional<std::size_t> left;
    if (budget.evaluations) left = *budget.evaluations - used;
    const search_state state(space, hist, {}, left);
    if (strat.finished(state)) {
      res.reason = stop_reason::strategy_finished;
      break;
    }
    const std::size_t n = left ? std::min(batch_size, *left) : batch_size;
    auto proposals = strat.propose(state, n);
    // Contract checks: a strategy that breaks them is a bug to report, not a failing variant.
    if (proposals.size() > n)
      throw error("strategy '" + strat.name() + "' proposed " + std::to_string(proposals.size()) +
                  " configurations where " + std::to_string(n) + " were asked for");
    for (std::size_t i = 0; i < proposals.size(); ++i) {
      const auto& c = proposals[i];
      if (!space.is_valid(c))
        throw error(
            "strategy '" + strat.name() + "' proposed an invalid configuration " +
            (c.size() == space.dimension() ? space.describe(c) : std::string("(of the wrong length)")));
      if (hist.measured(c))
        throw error("strategy '" + strat.name() + "' proposed the already measured configuration " +
                    space.describe(c));
      for (std::size_t j = 0; j < i; ++j)
        if (proposals[j] == c)
          throw error("strategy '" + strat.name() + "' proposed " + space.describe(c) +
                      " twice in one batch");
    }
    if (proposals.empty()) {
      res.reason = strat.finished(state) ? stop_reason::strategy_finished : stop_reason::space_exhausted;
      break;
    }
    std::vector<trial> results(proposals.size());
    std::vector<bool> from_store(proposals.size(), false), have(proposals.size(), false);
    std::vector<evaluation_request> to_eval;
    for (std::size_t i = 0; i < proposals.size(); ++i) {
      const std::uint64_t s = seq + i;
      if (auto it = stored.find(s); it != stored.end()) {
        if (it->second.cfg != proposals[i])
          throw error("cannot resume: at trial " + std::to_string(s) + " the strategy now proposes " +
                      space.describe(proposals[i]) + " but the run recorded " +
                      space.describe(it->second.cfg) + " (were the config, the seed or kforge changed?)");
        results[i] = std::move(it->second);
        from_store[i] = have[i] = true;
        stored.erase(it);
        ++res.resumed;
      } else {
        to_eval.push_back({s, proposals[i], batch_no});
      }
    }
    if (!to_eval.empty()) {
      const std::size_t expected = to_eval.size();
      eval.submit(std::move(to_eval));
      std::size_t got = 0;
      while (got < expected) {
        auto done = eval.collect(true);
        if (done.empty() && eval.in_flight() == 0)
          throw error("the evaluator returned " + std::to_string(got) + " of " + std::to_string(expected) +
                      " trials");
        for (auto& t : done) {
          if (t.sequence < seq || t.sequence >= seq + proposals.size() || have[t.sequence - seq])
            throw error("the evaluator returned an unexpected trial (sequence " + std::to_string(t.sequence) +
                        ")");
          const auto i = static_cast<std::size_t>(t.sequence - seq);
          if (t.cfg != proposals[i])
            throw error("the evaluator changed the configuration of trial " + std::to_string(t.sequence));
          t.batch = batch_no;
          if (!simulated) {
            // Wall clock: commit as soon as the trial is known.
            t.clock_s = wall_clock();
            if (store) store->commit(t);
          }
          results[i] = std::move(t);
          have[i] = true;
          ++got;
        }
      }
    }
    // In sequence order: simulated clock, commit of new trials, history, callbacks.
    for (std::size_t i = 0; i < results.size(); ++i) {
      auto& t = results[i];
      if (simulated) {
        sim_clock += t.cost.total();
        if (!from_store[i]) {
          t.clock_s = sim_clock;
          if (store) store->commit(t);
        }
      }
      hist.add(std::move(t));
      if (opts.on_trial) opts.on_trial(hist.trials().back(), hist, budget);
    }
    strat.observe(
        search_state(space, hist, {}, std::nullopt),
        std::span<const trial>(hist.trials().data() + hist.size() - results.size(), results.size()));
    seq += proposals.size();
    ++batch_no;
  }
  res.clock_s = simulated ? sim_clock : wall_clock();
  res.wall_s = seconds_since(t0);
  if (!stored.empty() && opts.log)
    *opts.log << "note: " << stored.size()
              << " stored trials lie beyond where this run stopped (budget lowered?)\n";
  return res;
}

namespace {
json spec_fingerprint(const experiment_spec& s) {
  return {{"problem", {{"kind", s.prob.source_kind}, {"space", describe_space(s.prob.space)}}},
          {"strategy", {{"type", s.strategy.type}, {"params", s.strategy.params}}},
          {"evaluator", {{"type", s.evaluator.type}, {"params", s.evaluator.params}}},
          {"seed", s.seed},
          {"batch_size", s.batch_size ? json(*s.batch_size) : json(nullptr)}};
}
}  // namespace

run_result run_experiment(const experiment_spec& spec, const run_options& opts) {
  register_builtins();
  std::unique_ptr<run_store> store;
  if (opts.use_store) {
    store = std::make_unique<run_store>(spec.output);
    const auto fp = spec_fingerprint(spec);
    if (store->has_meta("fingerprint")) {
      if (!opts.resume && store->trial_count() > 0)
        throw error("run folder " + spec.output.string() + " already holds a run of " +
                    std::to_string(store->trial_count()) +
                    " trials: pass --resume to continue it, or choose another output");
      if (opts.resume && store->meta("fingerprint") != fp)
        throw error(
            "cannot resume: run folder " + spec.output.string() +
            " holds a run of another experiment (problem, strategy, evaluator, seed or batch size differ)");
    }
    store->set_meta("fingerprint", fp);
    store->set_meta("config", spec.raw);
    store->set_meta("config_file", spec.file);
    store->set_meta("space", describe_space(spec.prob.space));
    store->set_meta("problem", {{"kind", spec.prob.source_kind},
                                {"file", spec.prob.source_file},
                                {"name", spec.prob.name},
                                {"problem_size", spec.prob.problem_size}});
    store->set_meta("kforge_version", std::string(version()));
    store->set_meta("name", spec.name);
  }
  auto strat = strategy_registry().create(spec.strategy);
  strat.set_name(spec.strategy.type);
  const evaluator_context ctx{spec.prob, spec.base_dir, spec.output};
  auto eval = evaluator_registry().create(spec.evaluator, ctx);
  if (store) store->set_meta("evaluator", eval.describe());
  const std::size_t batch = spec.batch_size ? *spec.batch_size : std::max<std::size_t>(1, eval.parallelism());
  auto res = run_loop(spec.prob.space, strat, eval, spec.budget, spec.seed, batch, store.get(), opts);
  if (store) {
    store->set_meta("evaluator", eval.describe());  // again: restarts, profiling state at the end
    json fin = {{"reason", std::string(to_string(res.reason))},
                {"trials", res.history.size()},
                {"clock_s", res.clock_s}};
    if (const auto* b = res.history.best())
      fin["best"] = {{"sequence", b->sequence},
                     {"time_ms", b->time_ms},
                     {"configuration", spec.prob.space.to_json(b->cfg)}};
    store->set_meta("finished", fin);
  }
  return res;
}

}  // namespace kf
