#include "kforge/experiment.hpp"

#include <algorithm>
#include <thread>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>
#include <ostream>
#include <set>

#include "kforge/error.hpp"
#include "kforge/kforge.hpp"
#include "kforge/run_folder.hpp"

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
    case stop_reason::interrupted:
      return "interrupted";
  }
  return "?";
}

namespace {

// The loop of one run, as named steps. Trials flow:
//
//   fill(): the run's start configurations first (run_options::start), then strategy.propose(want) ->
//           contract checks -> stored? (resume) : evaluator.submit
//   next_group(): the stored group of this step (resume) or the evaluator's next arrivals
//   observe(): clock, store.commit, history, callback, strategy.observe(group)
//
// In `continuous` scheduling (schedule_mode) the evaluator's in-flight set is refilled to `batch_size` after
// every group that arrives, and the strategy sees the configurations still in flight (pending); in `batches`
// it waits for the whole batch first. A synchronous evaluator (replay) returns a whole batch as one group, so
// both give the same trial sequence for a seed and batch size.
class loop {
 public:
  loop(const search_space& space, strategy& strat, evaluator& eval, const budget_spec& budget,
       std::size_t batch_size, run_store* store, const run_options& opts)
      : space_(space),
        strat_(strat),
        eval_(eval),
        budget_(budget),
        batch_(std::max<std::size_t>(1, batch_size)),
        store_(store),
        opts_(opts),
        simulated_(eval.simulated_clock()) {}

  run_result run(std::uint64_t seed) {
    check_start();
    strat_.initialize(space_, seed);
    load_stored();
    while (true) {
      if (opts_.interrupt && opts_.interrupt->load()) {
        res_.reason = stop_reason::interrupted;  // what is in flight is dropped, as by a kill
        break;
      }
      if (!stopping_) {
        if (auto r = budget_reached()) stop(*r);
      }
      if (!stopping_ && (opts_.schedule == schedule_mode::continuous || in_flight_.empty())) fill();
      if (in_flight_.empty()) break;  // nothing proposed, nothing running: done
      if (wall_grace_over()) {
        if (opts_.log)
          *opts_.log << "note: " << in_flight_.size() << " trial(s) still in flight " << budget_.wall_grace()
                     << " s after the wall-time budget were dropped (budget.wall_grace_s)\n";
        break;  // as on an interrupt: not stored; a --resume with a larger budget evaluates them
      }
      bool from_store = false;
      auto group = next_group(from_store);
      if (!group.empty()) observe(std::move(group), from_store);
    }
    res_.clock_s = simulated_ ? sim_clock_ : wall_clock();
    res_.wall_s = seconds_since(t0_);
    if (!stored_.empty() && opts_.log)
      *opts_.log << "note: " << stored_.size()
                 << " stored trials lie beyond where this run stopped (budget lowered?)\n";
    return std::move(res_);
  }

 private:
  // Resume: the stored trials by sequence, and their observation groups in order.
  void load_stored() {
    if (!store_) return;
    for (auto& t : store_->trials()) {
      clock_offset_ = std::max(clock_offset_, t.clock_s);
      groups_[t.batch].push_back(t.sequence);
      stored_.emplace(t.sequence, std::move(t));
    }
    if (!stored_.empty() && !opts_.resume)
      throw error("run folder " + store_->dir().string() + " already holds " +
                  std::to_string(stored_.size()) +
                  " trials: pass --resume to continue that run, or choose another output folder");
  }

  double wall_clock() const { return clock_offset_ + seconds_since(t0_); }

  std::optional<stop_reason> budget_reached() const {
    const std::size_t used = res_.history.size() + in_flight_.size();
    if (budget_.evaluations && used >= *budget_.evaluations) return stop_reason::evaluations;
    if (budget_.simulated_seconds && simulated_ && sim_clock_ >= *budget_.simulated_seconds)
      return stop_reason::simulated_time;
    // While stored trials are replayed the wall clock is not this invocation's to spend.
    if (budget_.wall_seconds && stored_.empty() && wall_clock() >= *budget_.wall_seconds)
      return stop_reason::wall_time;
    return std::nullopt;
  }

  // After a wall-time stop, trials in flight may finish for the budget's grace period, no longer.
  bool wall_grace_over() const {
    return stopping_ && res_.reason == stop_reason::wall_time && budget_.wall_seconds && !simulated_ &&
           wall_clock() >= *budget_.wall_seconds + budget_.wall_grace();
  }

  void stop(stop_reason r) {
    stopping_ = true;
    res_.reason = r;
  }

  search_state state(std::optional<std::size_t> left) const {
    return search_state(space_, res_.history, pending_, left);
  }

  // Proposes enough configurations to bring the in-flight set to the batch size, and sends the new
  // ones to the evaluator (stored ones, on resume, wait for their group instead).
  void fill() {
    const std::size_t used = res_.history.size() + in_flight_.size();
    std::optional<std::size_t> left;
    if (budget_.evaluations) left = *budget_.evaluations - std::min(*budget_.evaluations, used);
    std::size_t want = batch_ - std::min(batch_, in_flight_.size());
    if (left) want = std::min(want, *left);
    if (want == 0) return;
    // The run's start configurations go first; the strategy then sees them as pending.
    std::vector<config> starts;
    while (next_start_ < opts_.start.size() && starts.size() < want)
      starts.push_back(opts_.start[next_start_++]);
    want -= starts.size();
    if (left) *left -= starts.size();
    submit(std::move(starts));
    if (want == 0) return;
    if (strat_.finished(state(left))) {
      if (in_flight_.empty()) stop(stop_reason::strategy_finished);
      return;
    }
    auto proposals = strat_.propose(state(left), want);
    check_contract(proposals, want);
    if (proposals.empty()) {
      if (in_flight_.empty())
        stop(strat_.finished(state(left)) ? stop_reason::strategy_finished : stop_reason::space_exhausted);
      return;
    }
    submit(std::move(proposals));
  }

  // Gives the configurations their sequence numbers and sends the new ones to the evaluator (stored
  // ones, on resume, wait for their group instead).
  void submit(std::vector<config> proposals) {
    std::vector<evaluation_request> to_eval;
    for (auto& c : proposals) {
      const std::uint64_t s = next_sequence_++;
      if (auto it = stored_.find(s); it != stored_.end() && it->second.cfg != c)
        throw error("cannot resume: at trial " + std::to_string(s) + " the run now evaluates " +
                    space_.describe(c) + " but the run recorded " + space_.describe(it->second.cfg) +
                    " (were the config, the seed or kforge changed?)");
      if (!stored_.count(s)) to_eval.push_back({s, c, step_});
      in_flight_.emplace(s, c);
      pending_.push_back(std::move(c));
    }
    if (!to_eval.empty()) eval_.submit(std::move(to_eval));
  }

  // run_options::start's precondition (the config reader checks it with the key; API callers may not).
  void check_start() const {
    for (std::size_t i = 0; i < opts_.start.size(); ++i) {
      const auto& c = opts_.start[i];
      if (c.size() != space_.dimension() || !space_.is_valid(c))
        throw error("start configuration " + std::to_string(i) +
                    " is not a valid configuration of the space");
      if (std::find(opts_.start.begin(), opts_.start.begin() + static_cast<long>(i), c) !=
          opts_.start.begin() + static_cast<long>(i))
        throw error("start configuration " + std::to_string(i) +
                    " repeats an earlier one: " + space_.describe(c));
    }
  }

  bool is_start(const config& c) const {
    return std::find(opts_.start.begin(), opts_.start.end(), c) != opts_.start.end();
  }
  static constexpr const char* start_hint =
      " (a start configuration of the run: the strategy observes it, or sees it pending, and must not "
      "propose it; include/kforge/strategy.hpp)";

  // A strategy that breaks its contract is a bug to report, not a failing variant.
  void check_contract(const std::vector<config>& proposals, std::size_t n) const {
    if (proposals.size() > n)
      throw error("strategy '" + strat_.name() + "' proposed " + std::to_string(proposals.size()) +
                  " configurations where " + std::to_string(n) + " were asked for");
    for (std::size_t i = 0; i < proposals.size(); ++i) {
      const auto& c = proposals[i];
      if (!space_.is_valid(c))
        throw error(
            "strategy '" + strat_.name() + "' proposed an invalid configuration " +
            (c.size() == space_.dimension() ? space_.describe(c) : std::string("(of the wrong length)")));
      if (res_.history.measured(c))
        throw error("strategy '" + strat_.name() + "' proposed the already measured configuration " +
                    space_.describe(c) + (is_start(c) ? start_hint : ""));
      if (std::find(pending_.begin(), pending_.end(), c) != pending_.end())
        throw error("strategy '" + strat_.name() + "' proposed " + space_.describe(c) +
                    ", which is still in flight" + (is_start(c) ? start_hint : ""));
      for (std::size_t j = 0; j < i; ++j)
        if (proposals[j] == c)
          throw error("strategy '" + strat_.name() + "' proposed " + space_.describe(c) +
                      " twice in one batch");
    }
  }

  // The next trials to observe, in sequence order: on resume the stored group of this step (every one of
  // them must be in flight: proposed again), else what the evaluator delivers next (all of the batch in
  // `batches` scheduling).
  std::vector<trial> next_group(bool& from_store) {
    std::vector<trial> group;
    from_store = false;
    if (auto g = groups_.begin(); g != groups_.end()) {
      bool all_proposed = true;
      for (auto s : g->second)
        all_proposed &= in_flight_.count(s) > 0;
      if (all_proposed) {
        for (auto s : g->second) {
          auto it = stored_.find(s);
          group.push_back(std::move(it->second));
          stored_.erase(it);
          ++res_.resumed;
        }
        groups_.erase(g);
        from_store = true;
        return group;
      }
      if (stopping_ || fill_stalled())
        throw error("cannot resume: the stored trials of step " + std::to_string(g->first) +
                    " were not proposed again (were the config, the seed or kforge changed?)");
    }
    std::size_t expected = 0;
    for (const auto& [s, c] : in_flight_)
      expected += stored_.count(s) ? 0 : 1;
    if (expected == 0) throw error("the evaluator has nothing in flight, but the loop waits for it");
    while (group.empty() || (opts_.schedule == schedule_mode::batches && group.size() < expected)) {
      bool deadline = false;
      auto done = wait_for_arrivals(deadline);
      if (deadline) break;  // the run loop stops next (interrupt or wall grace); what came is observed
      if (done.empty() && eval_.in_flight() == 0)
        throw error("the evaluator returned " + std::to_string(group.size()) + " of " +
                    std::to_string(expected) + " trials");
      for (auto& t : done) {
        auto it = in_flight_.find(t.sequence);
        if (it == in_flight_.end() || stored_.count(t.sequence))
          throw error("the evaluator returned an unexpected trial (sequence " + std::to_string(t.sequence) +
                      ")");
        if (t.cfg != it->second)
          throw error("the evaluator changed the configuration of trial " + std::to_string(t.sequence));
        group.push_back(std::move(t));
      }
    }
    std::sort(group.begin(), group.end(),
              [](const trial& a, const trial& b) { return a.sequence < b.sequence; });
    return group;
  }

  // The evaluator's next completions. Where the run can end while trials are in flight (a wall-time
  // budget with its grace, an interrupt flag), the evaluator is polled rather than waited on, so that a
  // worker that does not answer (one waiting for a GPU another process holds, a hung kernel below the
  // evaluator's own timeout) cannot keep the run past its budget or a Ctrl-C: `deadline` is set and
  // nothing is returned once the loop must stop. Otherwise a blocking wait.
  std::vector<trial> wait_for_arrivals(bool& deadline) {
    const bool can_end_early = !simulated_ && (budget_.wall_seconds || opts_.interrupt);
    if (!can_end_early) return eval_.collect(true);
    while (true) {
      auto done = eval_.collect(false);
      if (!done.empty() || eval_.in_flight() == 0) return done;
      if (!stopping_)
        if (auto r = budget_reached()) stop(*r);
      if ((opts_.interrupt && opts_.interrupt->load()) || wall_grace_over()) {
        deadline = true;
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // On resume, a stored group can only be completed by proposals; a loop that cannot propose more (the
  // in-flight set is full) and waits for it is stuck.
  bool fill_stalled() const { return in_flight_.size() >= batch_; }

  // Clock, commit (new trials), history, callback and the strategy's observation, in sequence order.
  void observe(std::vector<trial> group, bool from_store) {
    for (auto& t : group) {
      in_flight_.erase(t.sequence);
      pending_.erase(std::find(pending_.begin(), pending_.end(), t.cfg));
      if (simulated_) sim_clock_ += t.cost.total();
      if (!from_store) {
        t.batch = step_;
        t.clock_s = simulated_ ? sim_clock_ : wall_clock();
      }
    }
    // One transaction per group: a resumed run replays whole groups.
    if (store_ && !from_store) store_->commit(std::span<const trial>(group));
    for (auto& t : group) {
      res_.history.add(std::move(t));
      if (opts_.on_trial) opts_.on_trial(res_.history.trials().back(), res_.history, budget_);
    }
    const auto& all = res_.history.trials();
    strat_.observe(state(std::nullopt),
                   std::span<const trial>(all.data() + all.size() - group.size(), group.size()));
    ++step_;
  }

  const search_space& space_;
  strategy& strat_;
  evaluator& eval_;
  const budget_spec& budget_;
  const std::size_t batch_;
  run_store* store_;
  const run_options& opts_;
  const bool simulated_;
  const clock_type::time_point t0_ = clock_type::now();

  run_result res_;
  bool stopping_ = false;
  std::uint64_t next_sequence_ = 0;
  std::size_t next_start_ = 0;  // run_options::start given to the evaluator so far
  std::uint32_t step_ = 0;                                      // observation groups so far
  std::map<std::uint64_t, config> in_flight_;                   // proposed and not yet observed, by sequence
  std::vector<config> pending_;                                 // the same configurations, for search_state
  std::map<std::uint64_t, trial> stored_;                       // resume: stored trials not yet replayed
  std::map<std::uint32_t, std::vector<std::uint64_t>> groups_;  // resume: stored groups by step
  double clock_offset_ = 0;
  double sim_clock_ = 0;
};

}  // namespace

run_result run_loop(const search_space& space, strategy& strat, evaluator& eval, const budget_spec& budget,
                    std::uint64_t seed, std::size_t batch_size, run_store* store, const run_options& opts) {
  return loop(space, strat, eval, budget, batch_size, store, opts).run(seed);
}

json experiment_fingerprint(const experiment_spec& s) {
  json fp = {{"problem", {{"kind", s.prob.source_kind}, {"space", describe_space(s.prob.space)}}},
             {"strategy", {{"type", s.strategy.type}, {"params", s.strategy.params}}},
             {"evaluator", {{"type", s.evaluator.type}, {"params", s.evaluator.params}}},
             {"seed", s.seed},
             {"batch_size", s.batch_size ? json(*s.batch_size) : json(nullptr)}};
  // Only when not the default, so that runs stored before the key existed still resume.
  if (s.schedule == schedule_mode::batches) fp["schedule"] = "batches";
  if (!s.start.empty()) {  // evaluated first: the trial sequence depends on them
    json st = json::array();
    for (const auto& c : s.start)
      st.push_back(s.prob.space.to_json(c));
    fp["start"] = st;
  }
  if (!s.transfer.empty()) {  // the records the strategy starts from (docs/transfer.md)
    json t = json::array();
    for (const auto& f : s.transfer)
      t.push_back(std::filesystem::weakly_canonical(f).string());
    fp["transfer"] = t;
  }
  return canonical_fingerprint(std::move(fp), s.base_dir);
}

std::filesystem::path choose_run_folder(const experiment_spec& spec, bool resume, std::ostream* log) {
  if (!spec.output.empty()) return spec.output;
  if (!resume) return create_run_folder(default_runs_root, spec.name, spec.seed);
  const auto runs = find_runs(default_runs_root, experiment_fingerprint(spec));
  for (const auto& r : runs)
    if (!r.finished) {
      if (log)
        *log << "resuming " << r.folder.string() << " (" << r.trials
             << " trials stored): the latest unfinished run of this experiment\n";
      return r.folder;
    }
  std::string why = "no unfinished run of experiment '" + spec.name + "' with seed " +
                    std::to_string(spec.seed) + " and this config under " + default_runs_root.string() +
                    "/ to resume";
  if (!runs.empty())
    why += " (the latest, " + runs.front().folder.string() + ", finished with " +
           std::to_string(runs.front().trials) + " trials; to extend it give --output " +
           runs.front().folder.string() + " and a larger budget)";
  else
    why += "; without --resume a new run starts";
  throw config_error("command line", "--resume", why);
}

namespace {
json iso_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Opens the store of a run about to start in `folder` (locked by the caller) and checks that it may:
// a fresh run needs an empty folder, a resumed one a stored run of the same experiment.
std::unique_ptr<run_store> open_run_store(const experiment_spec& spec, const std::filesystem::path& folder,
                                          const json& fp, bool resume) {
  auto store = std::make_unique<run_store>(folder);
  const auto stored = store->meta("fingerprint");
  if (resume && stored.is_null())
    throw config_error(
        "command line", "--resume",
        "nothing to resume in " + folder.string() +
            ": no run was stored there (run.sqlite is new or empty); without --resume a new run starts");
  if (!resume && store->trial_count() > 0)
    throw error("run folder " + folder.string() + " already holds a run of " +
                std::to_string(store->trial_count()) +
                " trials: pass --resume to continue it, or choose another output");
  if (resume) {
    const auto file = store->meta("config_file");
    const std::filesystem::path base = file.is_string() && file.get<std::string>().rfind("embedded:", 0) != 0
                                           ? std::filesystem::absolute(file.get<std::string>()).parent_path()
                                           : std::filesystem::path();
    if (const auto diff = fingerprint_difference(canonical_fingerprint(stored, base), fp); !diff.empty())
      throw error("cannot resume: run folder " + folder.string() +
                  " holds a run of another experiment: " + diff);
  }
  if (!store->has_meta("created_at")) store->set_meta("created_at", iso_now());
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
  store->set_meta("finished", nullptr);  // this invocation has not finished (yet)
  store->set_meta("interrupted", nullptr);
  store->set_meta("failed", nullptr);
  return store;
}

json budget_json(const budget_spec& b) {
  json j = json::object();
  if (b.evaluations) j["evaluations"] = *b.evaluations;
  if (b.wall_seconds) j["wall_time_s"] = *b.wall_seconds;
  if (b.simulated_seconds) j["simulated_time_s"] = *b.simulated_seconds;
  if (b.wall_grace_seconds) j["wall_grace_s"] = *b.wall_grace_seconds;
  if (b.wall_includes_setup) j["wall_includes_setup"] = true;
  return j;
}
}  // namespace

run_result run_experiment(const experiment_spec& spec, const run_options& opts) {
  register_builtins();
  std::unique_ptr<run_store> store;
  std::optional<run_lock> lock;
  std::filesystem::path folder = spec.output;
  if (opts.use_store) {
    folder = choose_run_folder(spec, opts.resume, opts.log);
    std::error_code ec;
    const auto stored_bytes = std::filesystem::file_size(folder / "run.sqlite", ec);
    if (opts.resume && (ec || stored_bytes == 0))  // missing or empty
      throw config_error("command line", "--resume",
                         "nothing to resume in " + folder.string() +
                             ": no run was stored there (run.sqlite is missing or empty); without --resume a "
                             "new run starts");
    lock.emplace(folder);  // held until the run ends; refused at once when another process holds it
    store = open_run_store(spec, folder, experiment_fingerprint(spec), opts.resume);
    // What this invocation runs (the config may have been overridden on the command line).
    store->set_meta("run", {{"strategy", {{"type", spec.strategy.type}, {"params", spec.strategy.params}}},
                            {"evaluator", {{"type", spec.evaluator.type}, {"params", spec.evaluator.params}}},
                            {"seed", spec.seed},
                            {"budget", budget_json(spec.budget)},
                            {"batch_size", spec.batch_size ? json(*spec.batch_size) : json(nullptr)}});
  }
  run_result res;
  try {
    auto strat = strategy_registry().create(spec.strategy);
    strat.set_name(spec.strategy.type);
    if (spec.transfer_records) strat.set_transfer(spec.transfer_records);
    const evaluator_context ctx{spec.prob, spec.base_dir, folder};
    const auto setup_start = std::chrono::steady_clock::now();
    auto eval =
        opts.make_evaluator ? opts.make_evaluator(ctx) : evaluator_registry().create(spec.evaluator, ctx);
    // The evaluator's start-up (workers greeted, the reference compiled) precedes the run's clock.
    res.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
    if (store) store->set_meta("evaluator", eval.describe());
    const std::size_t batch =
        spec.batch_size ? *spec.batch_size : std::max<std::size_t>(1, eval.parallelism());
    run_options o = opts;
    o.schedule = spec.schedule;
    o.start = spec.start;
    const double setup_s = res.setup_s;
    budget_spec budget = spec.budget;
    if (budget.wall_includes_setup && budget.wall_seconds)
      budget.wall_seconds = std::max(0.0, *budget.wall_seconds - setup_s);
    res = run_loop(spec.prob.space, strat, eval, budget, spec.seed, batch, store.get(), o);
    res.setup_s = setup_s;
    if (store) store->set_meta("evaluator", eval.describe());  // again: restarts, profiling state at the end
  } catch (const std::exception& e) {
    if (store) store->set_meta("failed", {{"error", excerpt(e.what(), 2000)}, {"at", iso_now()}});
    throw;
  }
  res.folder = folder;
  if (store) {
    json rec = {{"reason", std::string(to_string(res.reason))},
                {"trials", res.history.size()},
                {"clock_s", res.clock_s},
                {"setup_s", res.setup_s},
                {"at", iso_now()}};
    if (const auto* b = res.history.best())
      rec["best"] = {{"sequence", b->sequence},
                     {"time_ms", b->time_ms},
                     {"configuration", spec.prob.space.to_json(b->cfg)}};
    store->set_meta(res.reason == stop_reason::interrupted ? "interrupted" : "finished", rec);
  }
  return res;
}

}  // namespace kf
