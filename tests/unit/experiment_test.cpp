#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/strategies/random_search.hpp"
#include "support/replay_fixture.hpp"

namespace kf {
namespace {

std::vector<config> configs_of(const run_history& h) {
  std::vector<config> out;
  for (const auto& t : h.trials())
    out.push_back(t.cfg);
  return out;
}

TEST(experiment, budget_in_evaluations_and_simulated_time) {
  register_builtins();
  test::stencil_replay f;
  for (std::size_t batch : {1, 7}) {
    auto s = strategy_registry().create({"ga", {}, {}});
    auto e = f.make_evaluator();
    budget_spec b;
    b.evaluations = 30;
    const auto r = run_loop(f.prob.space, s, e, b, 1, batch, nullptr, {});
    EXPECT_EQ(r.history.size(), 30u);
    EXPECT_EQ(r.reason, stop_reason::evaluations);
    for (std::size_t i = 0; i < r.history.size(); ++i)
      EXPECT_EQ(r.history.trials()[i].sequence, i);
  }
  auto s = strategy_registry().create({"random", {}, {}});
  auto e = f.make_evaluator();
  budget_spec b;
  b.simulated_seconds = 5.0;
  const auto r = run_loop(f.prob.space, s, e, b, 2, 1, nullptr, {});
  EXPECT_EQ(r.reason, stop_reason::simulated_time);
  EXPECT_GE(r.clock_s, 5.0);
  // The loop stops before a batch once the limit is reached: the last trial crossed it.
  EXPECT_LT(r.clock_s - r.history.trials().back().cost.total(), 5.0);
  double sum = 0;
  for (const auto& t : r.history.trials()) {
    sum += t.cost.total();
    EXPECT_NEAR(t.clock_s, sum, 1e-9);
  }
}

TEST(experiment, exhausting_the_space_stops_cleanly) {
  register_builtins();
  test::stencil_replay f;
  auto s = strategy_registry().create({"random", {}, {}});
  auto e = f.make_evaluator();
  const auto r = run_loop(f.prob.space, s, e, {}, 5, 64, nullptr, {});
  EXPECT_EQ(r.history.size(), f.prob.space.valid().size());
  EXPECT_TRUE(r.reason == stop_reason::strategy_finished || r.reason == stop_reason::space_exhausted);
  ASSERT_NE(r.history.best(), nullptr);
  EXPECT_NEAR(r.history.best()->time_ms, 0.159424, 1e-6);  // the recorded optimum
}

TEST(experiment, resume_from_a_partial_store_continues_identically) {
  register_builtins();
  test::stencil_replay f;
  test::temp_dir tmp;
  budget_spec b;
  b.evaluations = 40;
  auto ref_s = strategy_registry().create({"ga", {}, {}});
  auto ref_e = f.make_evaluator();
  const auto ref = run_loop(f.prob.space, ref_s, ref_e, b, 9, 3, nullptr, {});
  // Store the trials of the first 6 observation groups (as if killed after them: the loop commits each
  // group in one transaction), then resume.
  std::size_t kept = 0;
  {
    run_store st(tmp.path() / "run");
    for (const auto& t : ref.history.trials())
      if (t.batch < 6) st.commit(t), ++kept;
  }
  ASSERT_GT(kept, 12u);
  run_store st(tmp.path() / "run");
  auto s = strategy_registry().create({"ga", {}, {}});
  auto e = f.make_evaluator();
  run_options o;
  EXPECT_THROW(run_loop(f.prob.space, s, e, b, 9, 3, &st, o), error);  // without resume: refused
  o.resume = true;
  auto s2 = strategy_registry().create({"ga", {}, {}});
  const auto r = run_loop(f.prob.space, s2, e, b, 9, 3, &st, o);
  EXPECT_EQ(r.resumed, kept);
  EXPECT_EQ(configs_of(r.history), configs_of(ref.history));
  EXPECT_EQ(st.trial_count(), 40u);
  // A different seed cannot resume this run.
  auto s3 = strategy_registry().create({"ga", {}, {}});
  run_store st2(tmp.path() / "run");
  EXPECT_THROW(run_loop(f.prob.space, s3, e, b, 10, 3, &st2, o), error);
}

// A strategy that breaks its contract is reported, not silently tolerated.
struct repeats_itself {
  config c;
  std::vector<config> propose(const search_state& s, std::size_t) {
    if (c.empty()) c = s.space().valid().at(0);
    return {c};
  }
  void observe(const search_state&, std::span<const trial>) {}
};

TEST(experiment, contract_violations_are_errors) {
  test::stencil_replay f;
  strategy s(repeats_itself{}, "repeats_itself");
  auto e = f.make_evaluator();
  budget_spec b;
  b.evaluations = 5;
  try {
    run_loop(f.prob.space, s, e, b, 1, 1, nullptr, {});
    FAIL();
  } catch (const error& ex) {
    EXPECT_NE(std::string(ex.what()).find("already measured"), std::string::npos) << ex.what();
  }
}

// budget.wall_includes_setup: the evaluator's start-up is charged to the wall-time budget. An evaluator
// that takes 0.4 s to start leaves nothing of a 0.3 s budget; without the option the loop gets its 0.3 s.
TEST(experiment, a_wall_budget_that_includes_setup_charges_the_evaluators_start) {
  register_builtins();
  test::temp_dir tmp;
  auto run = [&](bool includes) {
    const auto cfg = test::write_file(
        tmp.path() / "e.yaml",
        "problem: {t1: " + (test::source_dir() / "experiments/stencil2d-h200/T1.json").string() +
            "}\nstrategy: random\nevaluator: {type: replay, params: {file: " +
            (test::source_dir() / "experiments/stencil2d-h200/cache.json").string() +
            "}}\nbudget: {wall_time_s: 0.3, wall_includes_setup: " + (includes ? "true" : "false") + "}\n");
    auto spec = load_experiment(cfg.string());
    run_options o;
    o.use_store = false;
    o.make_evaluator = [&spec](const evaluator_context& ctx) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      return evaluator_registry().create(spec.evaluator, ctx);
    };
    return run_experiment(spec, o);
  };
  const auto charged = run(true);
  EXPECT_GE(charged.setup_s, 0.4);
  EXPECT_EQ(charged.reason, stop_reason::wall_time);
  EXPECT_EQ(charged.history.size(), 0u);
  const auto free_start = run(false);
  EXPECT_GT(free_start.history.size(), 0u);
}

// `start:` configurations are evaluated first, in order, whatever the strategy; a resumed run replays them.
TEST(experiment, start_configurations_come_first_and_resume) {
  register_builtins();
  test::stencil_replay f;
  const auto& valid = f.prob.space.valid();
  run_options o;
  o.start = {valid.at(3), valid.at(11)};
  budget_spec b;
  b.evaluations = 20;
  for (std::size_t batch : {1, 3}) {
    auto s = strategy_registry().create({"hybrid", {}, {}});
    auto e = f.make_evaluator();
    const auto r = run_loop(f.prob.space, s, e, b, 4, batch, nullptr, o);
    ASSERT_EQ(r.history.size(), 20u);
    EXPECT_EQ(r.history.trials()[0].cfg, o.start[0]);
    EXPECT_EQ(r.history.trials()[1].cfg, o.start[1]);
  }
  // A budget smaller than the start list: only the first start configurations run.
  b.evaluations = 1;
  {
    auto s = strategy_registry().create({"random", {}, {}});
    auto e = f.make_evaluator();
    const auto r = run_loop(f.prob.space, s, e, b, 4, 4, nullptr, o);
    ASSERT_EQ(r.history.size(), 1u);
    EXPECT_EQ(r.history.trials()[0].cfg, o.start[0]);
  }
  // Resume: the first groups stored, the rest continued identically.
  b.evaluations = 24;
  auto ref_s = strategy_registry().create({"ga", {}, {}});
  auto ref_e = f.make_evaluator();
  const auto ref = run_loop(f.prob.space, ref_s, ref_e, b, 9, 3, nullptr, o);
  test::temp_dir tmp;
  {
    run_store st(tmp.path() / "run");
    for (const auto& t : ref.history.trials())
      if (t.batch < 3) st.commit(t);
  }
  run_store st(tmp.path() / "run");
  auto s = strategy_registry().create({"ga", {}, {}});
  auto e = f.make_evaluator();
  o.resume = true;
  const auto r = run_loop(f.prob.space, s, e, b, 9, 3, &st, o);
  EXPECT_GT(r.resumed, 0u);
  EXPECT_EQ(configs_of(r.history), configs_of(ref.history));
}

// A strategy that proposes a start configuration breaks its contract; the error says it was one. Start
// configurations that are invalid or repeated are misuse of run_loop.
TEST(experiment, proposing_a_start_configuration_is_a_contract_error_that_says_so) {
  register_builtins();
  test::stencil_replay f;
  run_options o;
  o.start = {f.prob.space.valid().at(0)};
  budget_spec b;
  b.evaluations = 5;
  for (std::size_t batch : {1, 2}) {  // asked after the start trial came back; asked while it runs
    strategy s(repeats_itself{}, "repeats_itself");
    auto e = f.make_evaluator();
    try {
      run_loop(f.prob.space, s, e, b, 1, batch, nullptr, o);
      ADD_FAILURE() << "no error with batch " << batch;
    } catch (const error& ex) {
      const std::string what = ex.what();
      EXPECT_NE(what.find(batch == 1 ? "already measured" : "still in flight"), std::string::npos) << what;
      EXPECT_NE(what.find("a start configuration of the run"), std::string::npos) << what;
    }
  }
  auto e = f.make_evaluator();
  auto s = strategy_registry().create({"random", {}, {}});
  o.start = {f.prob.space.valid().at(0), f.prob.space.valid().at(0)};
  EXPECT_THROW(run_loop(f.prob.space, s, e, b, 1, 1, nullptr, o), error);
  o.start = {config(f.prob.space.dimension(), 9999)};
  EXPECT_THROW(run_loop(f.prob.space, s, e, b, 1, 1, nullptr, o), error);
}

// The `start` key: `default` (the problem's own configuration), mappings, and its misuse, each an error
// at the key; the start configurations are part of the run's identity (fingerprint).
TEST(experiment, start_key_reads_default_and_mappings_and_rejects_misuse) {
  register_builtins();
  test::temp_dir tmp;
  const auto t1 = (test::source_dir() / "experiments/stencil2d-h200/T1.json").string();
  const auto cache = (test::source_dir() / "experiments/stencil2d-h200/cache.json").string();
  auto load = [&](const std::string& problem, const std::string& start) {
    const auto cfg =
        test::write_file(tmp.path() / "e.yaml", "problem: " + problem +
                                                    "\nstrategy: random\nevaluator: {type: replay, "
                                                    "params: {file: " +
                                                    cache + "}}\nstart: " + start + "\n");
    return load_experiment(cfg.string());
  };
  const auto d = load("{t1: " + t1 + "}", "default");
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.prob.space.describe(d.start[0]),
            "{block_size_x=32, block_size_y=8, tile_size_x=1, tile_size_y=1, use_shared=0}");
  const auto m = load("{t1: " + t1 + "}",
                      "[default, {block_size_x: 64, block_size_y: 4, tile_size_x: 2, tile_size_y: 1, "
                      "use_shared: 1}]");
  ASSERT_EQ(m.start.size(), 2u);
  EXPECT_EQ(m.start[0], d.start[0]);
  EXPECT_EQ(m.prob.space.describe(m.start[1]),
            "{block_size_x=64, block_size_y=4, tile_size_x=2, tile_size_y=1, use_shared=1}");
  EXPECT_NE(experiment_fingerprint(d), experiment_fingerprint(load("{t1: " + t1 + "}",
                                                                   "[{block_size_x: 64, "
                                                                   "block_size_y: 4, tile_size_x: 2, "
                                                                   "tile_size_y: 1, use_shared: 1}]")));
  auto fails = [&](const std::string& problem, const std::string& start, const std::string& key,
                   const std::string& why) {
    try {
      load(problem, start);
      ADD_FAILURE() << "accepted start: " << start;
    } catch (const config_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(key), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  };
  fails("{cache: " + cache + "}", "default", "start", "states no default configuration");
  // A T1 file without a kernel (replay only) still states its Defaults.
  auto bare = nlohmann::json::parse(std::ifstream(t1));
  bare.erase("KernelSpecification");
  const auto bare_t1 = test::write_file(tmp.path() / "bare.json", bare.dump());
  const auto b = load("{t1: " + bare_t1.string() + "}", "default");
  ASSERT_FALSE(b.prob.kernel_desc);
  ASSERT_EQ(b.start.size(), 1u);
  EXPECT_EQ(b.start[0], d.start[0]);
  fails("{t1: " + t1 + "}", "[]", "start", "non-empty list");
  fails("{t1: " + t1 + "}", "[default, default]", "start[1]", "already an earlier entry");
  fails("{t1: " + t1 + "}", "[{block_size_z: 1}]", "start[0].block_size_z", "not a parameter");
  fails("{t1: " + t1 + "}", "[{block_size_x: 32}]", "start[0]", "block_size_y");
  fails("{t1: " + t1 + "}",
        "[{block_size_x: 33, block_size_y: 8, tile_size_x: 1, tile_size_y: 1, use_shared: 0}]", "start[0]",
        "33");
  fails("{t1: " + t1 + "}", "fastest", "start", "expected default");
}

TEST(experiment, full_run_with_store_and_report) {
  register_builtins();
  test::temp_dir tmp;
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {t1: " + (test::source_dir() / "experiments/stencil2d-h200/T1.json").string() +
          "}\nstrategy: ga\nevaluator: {type: replay, params: {file: " +
          (test::source_dir() / "experiments/stencil2d-h200/cache.json").string() +
          "}}\nbudget: {evaluations: 25}\nseed: 4\noutput: " + (tmp.path() / "run").string() + "\n");
  auto r = test::run_command(std::string(KFORGE_CLI) + " run " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("stopped: evaluation budget reached after 25 trials"), std::string::npos)
      << r.output;
  r = test::run_command(std::string(KFORGE_CLI) + " run " + cfg.string());
  EXPECT_EQ(r.status, 1) << r.output;  // the folder holds a finished run: --resume or another output
  r = test::run_command(std::string(KFORGE_CLI) + " run --resume --evaluations 30 " + cfg.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("after 30 trials (25 taken from the stored run)"), std::string::npos) << r.output;
  r = test::run_command(std::string(KFORGE_CLI) + " report " + (tmp.path() / "run").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("30 trials"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("convergence"), std::string::npos) << r.output;
  for (const char* fmt : {"jsonl", "csv", "t4", "kernel_tuner"}) {
    r = test::run_command(std::string(KFORGE_CLI) + " export " + (tmp.path() / "run").string() +
                          " --format " + fmt);
    EXPECT_EQ(r.status, 0) << fmt << ": " << r.output;
  }
}

}  // namespace
}  // namespace kf
