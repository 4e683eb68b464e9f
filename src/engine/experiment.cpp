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
