// The distributed run's logic in one process, without MPI: rank 0's coordinator and the other ranks'
// serve loops (threads) speak through an in-process channel that can silence a rank. Checks the wire
// format, that the trial sequence equals the single-process one (replay), that a silent rank or a rank
// whose evaluator breaks is lost and its requests re-issued with the sequence unchanged, and that the
// greetings refuse mixed devices, another experiment and a rank that cannot start.
// tests/mpi runs the same through mpirun.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>

#include "evaluators/mpi/coordinator.hpp"
#include "evaluators/mpi/serve.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/replay.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf::mpi {
namespace {

// N endpoints joined by mutex-guarded queues. silence(r) drops everything rank r sends from then on
// (a hung or dead rank, as rank 0 sees it); what is sent to it still arrives (so that its thread ends).
class network {
 public:
  explicit network(int n) : boxes_(static_cast<std::size_t>(n)) {}

  class endpoint final : public channel {
   public:
    endpoint(network& net, int rank) : net_(net), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(net_.boxes_.size()); }
    void send(int dest, tag kind, std::string body) override {
      if (net_.silenced(rank_, kind)) return;
      std::lock_guard lk(net_.mu_);
      net_.boxes_[static_cast<std::size_t>(dest)].push_back({rank_, kind, std::move(body)});
    }
    std::optional<message> poll() override {
      std::lock_guard lk(net_.mu_);
      auto& box = net_.boxes_[static_cast<std::size_t>(rank_)];
      if (box.empty()) return std::nullopt;
      auto m = std::move(box.front());
      box.pop_front();
      return m;
    }

   private:
    network& net_;
    int rank_;
  };

  /// Rank `r` goes silent after it has sent `trial_messages` trials messages.
  void silence_after(int r, int trial_messages) {
    std::lock_guard lk(mu_);
    silence_rank_ = r;
    silence_after_ = trial_messages;
  }

 private:
  bool silenced(int from, tag kind) {
    std::lock_guard lk(mu_);
    if (from != silence_rank_) return false;
    if (kind == tag::trials && silence_after_ > 0)
      --silence_after_;
    else if (silence_after_ == 0)
      return true;
    return false;
  }

  std::mutex mu_;
  std::vector<std::deque<message>> boxes_;
  int silence_rank_ = -1;
  int silence_after_ = 0;
};

// The replay of the stencil space recorded in the repository, as an experiment config.
experiment_spec stencil_experiment(const test::temp_dir& tmp, const std::string& strategy, int evaluations,
                                   int batch) {
  const auto dir = test::source_dir() / "experiments/stencil2d-h200";
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "name: dist\nproblem: {t1: " + (dir / "T1.json").string() + "}\nstrategy: {type: " + strategy +
          "}\nevaluator: {type: replay, params: {file: " + (dir / "cache.json").string() +
          "}}\nbudget: {evaluations: " + std::to_string(evaluations) +
          "}\nbatch_size: " + std::to_string(batch) + "\nseed: 5\n");
  return load_experiment(cfg.string());
}

// A replay that names its device and breaks after `fail_after` evaluations (never when negative).
struct test_replay {
  replay_evaluator inner;
  std::string device;
  int fail_after = -1;
  std::shared_ptr<int> done = std::make_shared<int>(0);
  std::vector<trial> evaluate(std::span<const evaluation_request> batch) const {
    if (fail_after >= 0 && *done >= fail_after) throw error("the test evaluator broke");
    *done += static_cast<int>(batch.size());
    return inner.evaluate(batch);
  }
  bool simulated_clock() const { return true; }
  nlohmann::json describe() const {
    auto d = inner.describe();
    d["device"] = device;
    return d;
  }
};

std::function<evaluator(const evaluator_context&)> make_test_replay(const experiment_spec& spec,
                                                                    std::string device, int fail_after = -1) {
  auto file =
      load_recorded_cached(resolve_path(spec.evaluator.params["file"].get<std::string>(), spec.base_dir));
  return [file, device, fail_after](const evaluator_context& ctx) -> evaluator {
    return evaluator(test_replay{replay_evaluator(file, ctx.prob.space), device, fail_after});
  };
}

// What rank 0's session does at the end: stop, then end (every rank finalises).
void stop_rank(channel& rank0, int r) {
  rank0.send(r, tag::stop, "{}");
  rank0.send(r, tag::end, R"({"finalize": true})");
}

// The single-process run: the loop with the configured evaluator.
std::vector<trial> single_process(const experiment_spec& spec) {
  auto strat = strategy_registry().create(spec.strategy);
  const evaluator_context ctx{spec.prob, spec.base_dir, {}};
  auto eval = evaluator_registry().create(spec.evaluator, ctx);
  run_options o;
  const auto res =
      run_loop(spec.prob.space, strat, eval, spec.budget, spec.seed, *spec.batch_size, nullptr, o);
  return {res.history.trials().begin(), res.history.trials().end()};
}

// A distributed run over `net`: ranks 1..n-1 serve (threads), rank 0 runs the loop with a coordinator.
struct distributed_run {
  std::vector<trial> trials;
  nlohmann::json described;
  std::set<int> lost;
  std::string log;
  std::vector<int> exit_status;
};

distributed_run run_distributed(const experiment_spec& spec, network& net, int n, coordinator_options co,
                                const std::vector<serve_options>& serving,
                                const std::function<std::optional<evaluator>()>& local = nullptr) {
  distributed_run out;
  out.exit_status.resize(static_cast<std::size_t>(n), -1);
  std::vector<std::unique_ptr<network::endpoint>> ends;
  for (int r = 0; r < n; ++r)
    ends.push_back(std::make_unique<network::endpoint>(net, r));
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r)
    threads.emplace_back([&, r] {
      out.exit_status[static_cast<std::size_t>(r)] =
          serve(*ends[static_cast<std::size_t>(r)], spec, serving[static_cast<std::size_t>(r - 1)]);
    });
  std::ostringstream log;
  co.fingerprint = experiment_fingerprint(spec);
  co.log = &log;
  co.lost = &out.lost;
  try {
    auto strat = strategy_registry().create(spec.strategy);
    evaluator eval(std::make_unique<coordinator>(*ends[0], co, local));
    run_options o;
    const auto res =
        run_loop(spec.prob.space, strat, eval, spec.budget, spec.seed, *spec.batch_size, nullptr, o);
    out.trials.assign(res.history.trials().begin(), res.history.trials().end());
    out.described = eval.describe();
  } catch (...) {
    for (int r = 1; r < n; ++r)
      stop_rank(*ends[0], r);
    for (auto& t : threads)
      t.join();
    throw;
  }
  for (int r = 1; r < n; ++r)
    stop_rank(*ends[0], r);
  for (auto& t : threads)
    t.join();
  out.log = log.str();
  return out;
}

void expect_same_sequence(const std::vector<trial>& a, const std::vector<trial>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sequence, b[i].sequence) << i;
    EXPECT_EQ(a[i].cfg, b[i].cfg) << i;
    EXPECT_EQ(a[i].st, b[i].st) << i;
    EXPECT_EQ(a[i].batch, b[i].batch) << i;
    EXPECT_TRUE(a[i].time_ms == b[i].time_ms || (std::isnan(a[i].time_ms) && std::isnan(b[i].time_ms))) << i;
    EXPECT_DOUBLE_EQ(a[i].clock_s, b[i].clock_s) << i;
  }
}

TEST(mpi_wire, trials_and_requests_round_trip_exactly) {
  trial t;
  t.sequence = 123456789012345ull;
  t.batch = 7;
  t.cfg = {3, 0, 4294967295u};
  t.st = status::wrong_result;
  t.time_ms = 0.1 + 0.2;  // not representable in few digits
  t.time_iqr_ms = trial::nan;
  t.time_min_ms = 1e-300;
  t.times_ms = {1.0 / 3, trial::nan, std::numeric_limits<double>::infinity()};
  t.cost = {0.5, 1e-9, 2.0 / 7, 0, 3, 4};
  t.metrics = {{"a.b", 1.25}, {"nan", trial::nan}, {"neg_inf", -std::numeric_limits<double>::infinity()}};
  t.error = "output 'y': 3 of 100 values differ \"quoted\"\n";
  t.device = "host-1:cuda:0 NVIDIA H200";
  t.sm_clock_mhz = 1980;
  t.clock_s = 12.5;
  t.timestamp = "2026-01-01T00:00:00Z";
  const trial u = trial_from_json(nlohmann::json::parse(to_json(t).dump()));
  EXPECT_EQ(u.sequence, t.sequence);
  EXPECT_EQ(u.batch, t.batch);
  EXPECT_EQ(u.cfg, t.cfg);
  EXPECT_EQ(u.st, t.st);
  EXPECT_EQ(u.time_ms, t.time_ms);
  EXPECT_TRUE(std::isnan(u.time_iqr_ms));
  EXPECT_EQ(u.time_min_ms, t.time_min_ms);
  ASSERT_EQ(u.times_ms.size(), 3u);
  EXPECT_EQ(u.times_ms[0], t.times_ms[0]);
  EXPECT_TRUE(std::isnan(u.times_ms[1]));
  EXPECT_EQ(u.times_ms[2], t.times_ms[2]);
  EXPECT_EQ(u.cost.check, t.cost.check);
  EXPECT_EQ(u.cost.benchmark, t.cost.benchmark);
  EXPECT_EQ(u.cost.total(), t.cost.total());
  EXPECT_EQ(u.metrics.at("a.b"), 1.25);
  EXPECT_TRUE(std::isnan(u.metrics.at("nan")));
  EXPECT_EQ(u.metrics.at("neg_inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(u.error, t.error);
  EXPECT_EQ(u.device, t.device);
  EXPECT_EQ(u.sm_clock_mhz, t.sm_clock_mhz);
  EXPECT_EQ(u.clock_s, t.clock_s);
  EXPECT_EQ(u.timestamp, t.timestamp);

  const evaluation_request r{42, {1, 2, 3}, 9};
  const auto back = request_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.sequence, 42u);
  EXPECT_EQ(back.cfg, r.cfg);
  EXPECT_EQ(back.batch, 9u);
}

TEST(mpi_wire, a_malformed_message_is_an_error_naming_the_field) {
  auto j = to_json(trial{});
  j.erase("status");
  try {
    (void)trial_from_json(j);
    FAIL();
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("\"status\""), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)request_from_json(nlohmann::json{{"sequence", "x"}, {"batch", 0}, {"cfg", {1}}}), error);
  EXPECT_THROW((void)parse_body("{not json", tag::trials, 3), error);
}

TEST(mpi_coordinator, the_trial_sequence_equals_the_single_process_one) {
  register_builtins();
  test::temp_dir tmp;
  for (const char* strategy : {"hybrid", "ga"}) {
    const auto spec = stencil_experiment(tmp, strategy, 60, 5);
    const auto one = single_process(spec);
    network net(4);
    const auto d = run_distributed(spec, net, 4, {}, std::vector<serve_options>(3));
    expect_same_sequence(d.trials, one);
    EXPECT_TRUE(d.lost.empty());
    EXPECT_EQ(d.exit_status, (std::vector<int>{-1, 0, 0, 0}));
    // Each trial names the host that measured it; the work was spread over the ranks.
    EXPECT_EQ(d.trials.front().device, host_name() + ":" + one.front().device);
    std::size_t by_ranks = 0;
    for (const auto& r : d.described["distributed"]["ranks"]) {
      EXPECT_GT(r["trials"].get<std::size_t>(), 0u) << strategy;
      by_ranks += r["trials"].get<std::size_t>();
    }
    EXPECT_EQ(by_ranks, 60u);
    EXPECT_EQ(d.described["type"], "replay");  // reports read the recorded optimum from it
    EXPECT_TRUE(d.described.contains("recorded_optimum"));
  }
}

TEST(mpi_coordinator, rank_0_may_evaluate_too) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "hybrid", 40, 4);
  const auto one = single_process(spec);
  network net(2);
  const evaluator_context ctx{spec.prob, spec.base_dir, {}};
  const auto d = run_distributed(spec, net, 2, {}, std::vector<serve_options>(1), [&] {
    return std::optional<evaluator>(evaluator_registry().create(spec.evaluator, ctx));
  });
  expect_same_sequence(d.trials, one);
  ASSERT_EQ(d.described["distributed"]["ranks"].size(), 2u);
  EXPECT_EQ(d.described["distributed"]["ranks"][0]["rank"], 0);
  EXPECT_GT(d.described["distributed"]["ranks"][0]["trials"].get<int>(), 0);
  EXPECT_GT(d.described["distributed"]["ranks"][1]["trials"].get<int>(), 0);
}

TEST(mpi_coordinator, a_silent_rank_is_lost_and_its_work_reissued_with_the_sequence_unchanged) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "hybrid", 60, 4);
  const auto one = single_process(spec);
  network net(3);
  net.silence_after(2, 3);  // rank 2 answers three times, then nothing (not even heartbeats)
  coordinator_options co;
  co.rank_timeout_s = 0.5;
  co.heartbeat_s = 0.05;
  const auto d = run_distributed(spec, net, 3, co, std::vector<serve_options>(2));
  expect_same_sequence(d.trials, one);
  EXPECT_EQ(d.lost, (std::set<int>{2}));
  EXPECT_NE(d.log.find("rank 2 (" + host_name() + ") is lost: silent for"), std::string::npos) << d.log;
  EXPECT_GE(d.described["distributed"]["reissued"].get<int>(), 1);
  EXPECT_TRUE(d.described["distributed"]["ranks"][1]["lost"].is_string());
  EXPECT_TRUE(d.described["distributed"]["ranks"][0]["lost"].is_null());
}

TEST(mpi_coordinator, a_rank_whose_evaluator_breaks_is_lost_and_the_run_goes_on) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "ga", 50, 4);
  const auto one = single_process(spec);
  network net(3);
  std::vector<serve_options> serving(2);
  const std::string device = "replay:NVIDIA H200";
  serving[0].make_evaluator = make_test_replay(spec, device);
  serving[1].make_evaluator = make_test_replay(spec, device, 5);
  const auto d = run_distributed(spec, net, 3, {}, serving);
  expect_same_sequence(d.trials, one);
  EXPECT_EQ(d.lost, (std::set<int>{2}));
  EXPECT_NE(d.log.find("its evaluator broke: the test evaluator broke"), std::string::npos) << d.log;
  EXPECT_EQ(d.exit_status[2], 1);
  EXPECT_EQ(d.exit_status[1], 0);
}

TEST(mpi_coordinator, every_rank_lost_stops_the_run_saying_how_to_resume) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "random", 30, 2);
  network net(2);
  std::vector<serve_options> serving(1);
  serving[0].make_evaluator = make_test_replay(spec, "replay:NVIDIA H200", 4);
  try {
    run_distributed(spec, net, 2, {}, serving);
    FAIL() << "expected an error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("every rank is lost"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kforge run --resume"), std::string::npos) << e.what();
  }
}

TEST(mpi_coordinator, mixed_devices_are_refused_unless_allowed) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "random", 20, 4);
  std::vector<serve_options> serving(2);
  serving[0].make_evaluator = make_test_replay(spec, "NVIDIA H200");
  serving[1].make_evaluator = make_test_replay(spec, "NVIDIA A100-SXM4-80GB");
  {
    network net(3);
    try {
      run_distributed(spec, net, 3, {}, serving);
      FAIL() << "expected a refusal";
    } catch (const config_error& e) {
      EXPECT_EQ(e.key_path(), "--allow-mixed-gpus");
      EXPECT_NE(e.reason().find("rank 1 (" + host_name() + "): NVIDIA H200; rank 2 (" + host_name() +
                                "): NVIDIA A100-SXM4-80GB"),
                std::string::npos)
          << e.reason();
    }
  }
  network net(3);
  coordinator_options co;
  co.allow_mixed_devices = true;
  const auto d = run_distributed(spec, net, 3, co, serving);
  EXPECT_EQ(d.trials.size(), 20u);
  EXPECT_EQ(d.described["device"], "mixed: NVIDIA A100-SXM4-80GB, NVIDIA H200");
}

TEST(mpi_coordinator, a_rank_that_cannot_start_or_runs_another_experiment_is_refused) {
  register_builtins();
  test::temp_dir tmp;
  const auto spec = stencil_experiment(tmp, "random", 20, 4);
  {
    network net(3);
    std::vector<serve_options> serving(2);
    serving[1].make_evaluator = [](const evaluator_context&) -> evaluator {
      throw error("no GPU is visible to kforge-worker");
    };
    try {
      run_distributed(spec, net, 3, {}, serving);
      FAIL() << "expected a refusal";
    } catch (const error& e) {
      EXPECT_NE(
          std::string(e.what()).find("rank 2 (" + host_name() +
                                     ") cannot start its evaluator: no GPU is visible to kforge-worker"),
          std::string::npos)
          << e.what();
    }
  }
  {
    // Rank 0 was started with another seed than the others (a different config on its host).
    network net(2);
    coordinator_options co;
    auto other = spec;
    other.seed = 99;
    std::vector<std::unique_ptr<network::endpoint>> ends;
    ends.push_back(std::make_unique<network::endpoint>(net, 0));
    ends.push_back(std::make_unique<network::endpoint>(net, 1));
    std::thread rank1([&] { serve(*ends[1], other, {}); });
    co.fingerprint = experiment_fingerprint(spec);
    try {
      coordinator c(*ends[0], co);
      ADD_FAILURE() << "expected a refusal";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "rank 1 (" + host_name() +
                    ") runs another experiment than rank 0: seed differs (rank 0's 5, rank 1's 99)"),
                std::string::npos)
          << e.what();
    }
    stop_rank(*ends[0], 1);
    rank1.join();
  }
}

}  // namespace
}  // namespace kf::mpi
