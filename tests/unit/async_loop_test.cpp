// The loop's scheduling: in `continuous` mode the evaluator's in-flight set is refilled as results arrive
// and strategies see what is still in flight; in `batches` mode the loop waits for whole batches; a
// synchronous evaluator gives the same sequence either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <sstream>
#include <thread>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/replay_fixture.hpp"

namespace kf {
namespace {

// An asynchronous evaluator that answers one request per collect(), newest first: results arrive out
// of order, one at a time, as from GPU workers of different speeds.
class one_at_a_time final : public async_evaluator {
 public:
  explicit one_at_a_time(std::size_t* peak) : peak_(peak) {}
  void submit(std::vector<evaluation_request> r) override {
    for (auto& x : r)
      queue_.push_back(std::move(x));
    *peak_ = std::max(*peak_, queue_.size());
  }
  std::vector<trial> collect(bool) override {
    if (queue_.empty()) return {};
    auto r = std::move(queue_.back());
    queue_.pop_back();
    trial t;
    t.sequence = r.sequence;
    t.cfg = r.cfg;
    t.st = status::ok;
    t.time_ms = 1.0 + static_cast<double>(r.cfg[0]);
    return {t};
  }
  std::size_t in_flight() const override { return queue_.size(); }
  std::size_t parallelism() const override { return 4; }

 private:
  std::deque<evaluation_request> queue_;
  std::size_t* peak_;
};

// An asynchronous evaluator whose every result takes `each` of wall time, one at a time (a slow kernel
// with adaptive repeats behind a queue of compiled variants).
class slow_queue final : public async_evaluator {
 public:
  explicit slow_queue(std::chrono::milliseconds each) : each_(each) {}
  void submit(std::vector<evaluation_request> r) override {
    for (auto& x : r)
      queue_.push_back(std::move(x));
  }
  std::vector<trial> collect(bool) override {
    if (queue_.empty()) return {};
    std::this_thread::sleep_for(each_);
    auto r = std::move(queue_.front());
    queue_.pop_front();
    trial t;
    t.sequence = r.sequence;
    t.cfg = r.cfg;
    t.st = status::ok;
    t.time_ms = 1.0;
    return {t};
  }
  std::size_t in_flight() const override { return queue_.size(); }
  std::size_t parallelism() const override { return 8; }

 private:
  std::deque<evaluation_request> queue_;
  std::chrono::milliseconds each_;
};

// Records what the loop asked for and what it said was pending.
struct recording_strategy {
  std::vector<std::size_t>* asked;
  std::vector<std::size_t>* pending_seen;
  rng r{7};
  std::vector<config> propose(const search_state& s, std::size_t n) {
    asked->push_back(n);
    pending_seen->push_back(s.pending().size());
    std::vector<config> out;
    for (std::size_t tries = 0; out.size() < n && tries < 1000; ++tries) {
      auto c = s.space().sample(r);
      if (!s.seen(c) && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
    }
    return out;
  }
  void observe(const search_state&, std::span<const trial>) {}
};

TEST(async_loop, continuous_refills_the_in_flight_set_and_shows_strategies_what_is_pending) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  std::size_t peak = 0;
  strategy s(recording_strategy{&asked, &pending});
  evaluator e(std::make_unique<one_at_a_time>(&peak));
  budget_spec b;
  b.evaluations = 20;
  run_options o;  // continuous by default
  const auto r = run_loop(f.prob.space, s, e, b, 1, 4, nullptr, o);
  EXPECT_EQ(r.history.size(), 20u);
  EXPECT_EQ(peak, 4u);
  ASSERT_GE(asked.size(), 2u);
  EXPECT_EQ(asked[0], 4u);
  EXPECT_EQ(pending[0], 0u);
  // After the first arrival: one slot to refill, three configurations still in flight.
  EXPECT_EQ(asked[1], 1u);
  EXPECT_EQ(pending[1], 3u);
  // Sequences are unique and cover 0..19 although results arrived out of order.
  std::vector<std::uint64_t> seqs;
  for (const auto& t : r.history.trials())
    seqs.push_back(t.sequence);
  std::sort(seqs.begin(), seqs.end());
  for (std::size_t i = 0; i < seqs.size(); ++i)
    EXPECT_EQ(seqs[i], i);
}

TEST(async_loop, batches_wait_for_the_whole_batch) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  std::size_t peak = 0;
  strategy s(recording_strategy{&asked, &pending});
  evaluator e(std::make_unique<one_at_a_time>(&peak));
  budget_spec b;
  b.evaluations = 20;
  run_options o;
  o.schedule = schedule_mode::batches;
  const auto r = run_loop(f.prob.space, s, e, b, 1, 4, nullptr, o);
  EXPECT_EQ(r.history.size(), 20u);
  EXPECT_EQ(asked, (std::vector<std::size_t>{4, 4, 4, 4, 4}));
  for (auto p : pending)
    EXPECT_EQ(p, 0u);
}

TEST(async_loop, a_synchronous_evaluator_gives_the_same_sequence_in_both_modes) {
  register_builtins();
  test::stencil_replay f;
  for (const char* name : {"ga", "hybrid", "random"}) {
    std::vector<std::vector<config>> runs;
    for (auto mode : {schedule_mode::continuous, schedule_mode::batches}) {
      auto s = strategy_registry().create({name, {}, {}});
      auto e = f.make_evaluator();
      budget_spec b;
      b.evaluations = 40;
      run_options o;
      o.schedule = mode;
      const auto r = run_loop(f.prob.space, s, e, b, 3, 5, nullptr, o);
      std::vector<config> cs;
      for (const auto& t : r.history.trials())
        cs.push_back(t.cfg);
      runs.push_back(cs);
    }
    EXPECT_EQ(runs[0], runs[1]) << name;
  }
}

TEST(async_loop, the_evaluation_budget_counts_what_is_in_flight) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  std::size_t peak = 0;
  strategy s(recording_strategy{&asked, &pending});
  evaluator e(std::make_unique<one_at_a_time>(&peak));
  budget_spec b;
  b.evaluations = 6;
  const auto r = run_loop(f.prob.space, s, e, b, 1, 4, nullptr, {});
  EXPECT_EQ(r.history.size(), 6u);  // never proposed beyond the budget, nothing in flight is lost
  std::size_t total = 0;
  for (auto n : asked)
    total += n;
  EXPECT_EQ(total, 6u);
}

TEST(async_loop, trials_in_flight_past_the_wall_time_grace_are_dropped) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  strategy s(recording_strategy{&asked, &pending});
  // Eight in flight at 300 ms each: waiting for all would end the run at ~2.4 s.
  evaluator e(std::make_unique<slow_queue>(std::chrono::milliseconds(300)));
  budget_spec b;
  b.wall_seconds = 0.1;
  b.wall_grace_seconds = 0.45;
  std::ostringstream log;
  run_options o;
  o.log = &log;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_loop(f.prob.space, s, e, b, 1, 8, nullptr, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.reason, stop_reason::wall_time);
  // The loop looks at the clock between results: one or two arrive before 0.55 s is passed, never all.
  EXPECT_GE(r.history.size(), 1u);
  EXPECT_LE(r.history.size(), 3u);
  EXPECT_LT(took, 2.0);
  EXPECT_NE(log.str().find("were dropped (budget.wall_grace_s)"), std::string::npos) << log.str();
}

// An evaluator whose workers never answer (each waits for a GPU another process holds): a blocking
// collect() returns nothing only after `block`, a polling one at once.
class silent_workers final : public async_evaluator {
 public:
  explicit silent_workers(std::chrono::milliseconds block) : block_(block) {}
  void submit(std::vector<evaluation_request> r) override { n_ += r.size(); }
  std::vector<trial> collect(bool wait) override {
    if (wait) std::this_thread::sleep_for(block_);
    return {};
  }
  std::size_t in_flight() const override { return n_; }
  std::size_t parallelism() const override { return 2; }

 private:
  std::size_t n_ = 0;
  std::chrono::milliseconds block_;
};

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(async_loop, workers_that_never_answer_do_not_keep_the_run_past_its_wall_grace) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  strategy s(recording_strategy{&asked, &pending});
  evaluator e(std::make_unique<silent_workers>(std::chrono::milliseconds(4000)));
  budget_spec b;
  b.wall_seconds = 0.1;
  b.wall_grace_seconds = 0.2;
  run_result r;
  const double took = seconds_of([&] { r = run_loop(f.prob.space, s, e, b, 1, 2, nullptr, {}); });
  EXPECT_EQ(r.reason, stop_reason::wall_time);
  EXPECT_EQ(r.history.size(), 0u);
  EXPECT_LT(took, 2.0);  // a blocking wait would take 4 s
}

TEST(async_loop, an_interrupt_ends_a_run_whose_workers_never_answer) {
  register_builtins();
  test::stencil_replay f;
  std::vector<std::size_t> asked, pending;
  strategy s(recording_strategy{&asked, &pending});
  evaluator e(std::make_unique<silent_workers>(std::chrono::milliseconds(4000)));
  std::atomic<bool> stop{false};
  run_options o;
  o.interrupt = &stop;
  std::thread ctrl_c([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    stop = true;
  });
  run_result r;
  const double took = seconds_of([&] { r = run_loop(f.prob.space, s, e, budget_spec{}, 1, 2, nullptr, o); });
  ctrl_c.join();
  EXPECT_EQ(r.reason, stop_reason::interrupted);
  EXPECT_LT(took, 2.0);
}

TEST(async_loop, the_default_wall_grace_is_a_tenth_of_the_budget_and_at_least_five_seconds) {
  budget_spec b;
  b.wall_seconds = 10;
  EXPECT_DOUBLE_EQ(b.wall_grace(), 5.0);
  b.wall_seconds = 600;
  EXPECT_DOUBLE_EQ(b.wall_grace(), 60.0);
  b.wall_grace_seconds = 1.5;
  EXPECT_DOUBLE_EQ(b.wall_grace(), 1.5);
}

}  // namespace
}  // namespace kf
