// Transfer records (include/kforge/transfer.hpp): binding to a space, the rank prior, and the
// strategies that take them (the contract holds, the records' best comes first, resume-safe
// determinism), plus the `transfer:` key of experiment configs and score suites.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/experiment_config.hpp"
#include "kforge/kforge.hpp"
#include "kforge/score_job.hpp"
#include "kforge/transfer.hpp"
#include "support/replay_fixture.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

std::string stencil_cache() {
  return (test::source_dir() / "experiments/stencil2d-h200/cache.json").string();
}

// Two synthetic sources over three configurations of a space.
transfer_data three_configs(const search_space& space) {
  const auto& vs = space.valid();
  transfer_data d;
  transfer_source a, b;
  for (std::size_t i = 0; i < 3; ++i) {
    a.configs.push_back(vs.at(i));
    b.configs.push_back(vs.at(i));
    a.metrics.emplace_back();
    b.metrics.emplace_back();
  }
  a.time_ms = {3.0, 1.0, 2.0};
  b.time_ms = {INFINITY, 1.0, 5.0};
  d.sources = {a, b};
  return d;
}

TEST(Transfer, PriorRanksAndAveragesNormalScores) {
  test::stencil_replay f;
  const auto d = three_configs(f.prob.space);
  const transfer_prior p(d);
  const auto& vs = f.prob.space.valid();
  // Source a: ranks 2, 0, 1 of 3 successes; source b: failure, rank 0, rank 1 of 2 successes.
  const auto s0 = *p.score(vs.at(0)), s1 = *p.score(vs.at(1)), s2 = *p.score(vs.at(2));
  EXPECT_LT(s1, s2);
  EXPECT_LT(s2, s0);  // failed on b, slowest on a
  EXPECT_NEAR(s1, 0.5 * (-0.9674215661017 + -0.6744897501960817), 1e-9);  // Phi^-1(1/6), Phi^-1(1/4)
  ASSERT_EQ(p.ranked().size(), 3u);
  EXPECT_EQ(p.ranked().front(), vs.at(1));
  EXPECT_FALSE(p.score(vs.at(3)).has_value());
  EXPECT_GT(p.log_time_spread(), 0.0);
}

TEST(Transfer, LoadBindsARecordingToTheSpace) {
  test::stencil_replay f;
  const auto d = load_transfer({stencil_cache()}, f.prob.space);
  ASSERT_EQ(d.sources.size(), 1u);
  EXPECT_EQ(d.sources[0].configs.size(), f.prob.space.valid().size());
  EXPECT_THROW(load_transfer({(test::source_dir() / "no-such-file.json").string()}, f.prob.space), error);
}

// With the space's own recording as transfer, the first proposal of bo, hybrid and ga is the
// recorded optimum; the contract holds and runs are deterministic.
TEST(Transfer, StrategiesStartFromTheRecordsBestAndKeepTheContract) {
  register_builtins();
  test::stencil_replay f;
  auto data = std::make_shared<const transfer_data>(load_transfer({stencil_cache()}, f.prob.space));
  const transfer_prior prior(*data);
  for (const char* name : {"bo", "hybrid", "ga"}) {
    std::vector<std::vector<config>> runs;
    for (int k = 0; k < 2; ++k) {
      auto s = strategy_registry().create({name, {}, {}});
      ASSERT_TRUE(s.accepts_transfer()) << name;
      s.set_transfer(data);
      auto e = f.make_evaluator();
      budget_spec b;
      b.evaluations = 40;
      const auto r = run_loop(f.prob.space, s, e, b, 7, 4, nullptr, {});
      ASSERT_EQ(r.history.size(), 40u) << name;
      EXPECT_EQ(r.history.trials().front().cfg, prior.ranked().front()) << name;
      std::vector<config> seq;
      for (const auto& t : r.history.trials())
        seq.push_back(t.cfg);
      runs.push_back(seq);
    }
    EXPECT_EQ(runs[0], runs[1]) << name;
  }
  EXPECT_FALSE(strategy_registry().create({"random", {}, {}}).accepts_transfer());
}

TEST(Transfer, ExperimentConfigKeyIsCheckedAndRecorded) {
  test::temp_dir tmp;
  const auto t1 = (test::source_dir() / "experiments/stencil2d-h200/T1.json").string();
  const auto cfg = [&](const std::string& strategy, const std::string& transfer) {
    return "name: t\nproblem: {t1: " + t1 + "}\nstrategy: {type: " + strategy +
           "}\nevaluator: {type: replay, params: {file: " + stencil_cache() + "}}\nbudget: {evaluations: 5}\n" +
           transfer;
  };
  const auto good = test::write_file(tmp.path() / "good.yaml", cfg("hybrid", "transfer: [" + stencil_cache() + "]\n"));
  const auto spec = load_experiment(good.string());
  ASSERT_EQ(spec.transfer.size(), 1u);
  ASSERT_TRUE(spec.transfer_records);
  EXPECT_TRUE(experiment_fingerprint(spec).contains("transfer"));
  const auto expect_error = [&](const std::string& text, const std::string& needle) {
    const auto file = test::write_file(tmp.path() / "bad.yaml", text);
    try {
      (void)load_experiment(file.string());
      ADD_FAILURE() << "no error for: " << text;
    } catch (const config_error& e) {
      EXPECT_EQ(e.key_path().rfind("transfer", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(cfg("random", "transfer: [" + stencil_cache() + "]\n"), "does not use transfer");
  expect_error(cfg("hybrid", "transfer: []\n"), "non-empty list");
  expect_error(cfg("hybrid", "transfer: [nowhere.json]\n"), "no such file");
  expect_error(cfg("hybrid", "transfer: 3\n"), "non-empty list");
}

TEST(Transfer, ScoreSuiteNeedsTransferRecordsWhereAStrategyAsks) {
  test::temp_dir tmp;
  const auto t1 = (test::source_dir() / "experiments/stencil2d-h200/T1.json").string();
  const auto suite = [&](const std::string& transfer) {
    return "spaces:\n  - {name: s, recording: " + stencil_cache() + ", t1: " + t1 + transfer +
           "}\nstrategies: [hybrid, {type: hybrid, transfer: true}]\nseeds: 2\n";
  };
  const auto ok = test::write_file(tmp.path() / "ok.yaml", suite(", transfer: [" + stencil_cache() + "]"));
  const auto job = load_score_job(ok.string());
  ASSERT_EQ(job.strategy_transfer.size(), 2u);
  EXPECT_FALSE(job.strategy_transfer[0]);
  EXPECT_TRUE(job.strategy_transfer[1]);
  const auto bad = test::write_file(tmp.path() / "bad.yaml", suite(""));
  EXPECT_THROW((void)load_score_job(bad.string()), config_error);
}

}  // namespace
}  // namespace kf
