// Metrics that steer (issue 15 items 1 and 2): the bottleneck classifier and operator families, the
// bandit, and bo's multi-output GP, static features and roofline mean, and hybrid's bandit operators,
// on a synthetic space whose "kernel" has a memory part and a compute part and reports counters.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kforge/evaluator.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/strategies/operators.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

using strategies::bottleneck;
using strategies::operator_family;

search_space synthetic_space() {
  std::vector<param> ps;
  ps.push_back(make_param("block_size_x", param_type::integer, {value(32), value(64), value(128), value(256)}));
  ps.push_back(make_param("tile_size_x", param_type::integer, {value(1), value(2), value(4), value(8)}));
  ps.push_back(make_param("vector_width", param_type::integer, {value(1), value(2), value(4)}));
  ps.push_back(make_param("loop_unroll", param_type::integer, {value(0), value(1)}));
  ps.push_back(make_param("use_shared", param_type::integer, {value(0), value(1)}));
  ps.push_back(make_param("method", param_type::integer, {value(0), value(1), value(2)}));
  return search_space(std::move(ps), {});
}

// time = max(bytes / bandwidth, instructions / rate) with bytes falling with vector width and tiling,
// instructions with unrolling; counters as CUPTI names them; static registers from the configuration.
struct synthetic_kernel {
  const search_space* space;
  std::vector<trial> evaluate(std::span<const evaluation_request> batch) {
    std::vector<trial> out;
    for (const auto& r : batch) {
      const auto& c = r.cfg;
      const double bytes = 1e6 * (4.0 - c[2]) * (1.0 + 0.5 * (3 - c[1])) * (c[4] ? 0.8 : 1.0);
      const double inst = 1e5 * (2.0 - c[3]) * (1.0 + 0.3 * c[5]) * (1.0 + 0.2 * std::abs(int(c[0]) - 2));
      const double t_mem = bytes / 1e6, t_cmp = inst / 1e5;
      trial t;
      t.sequence = r.sequence;
      t.cfg = c;
      t.st = status::ok;
      t.time_ms = std::max(t_mem, t_cmp) + 0.01 * c[0];
      t.cost.benchmark = 1.0;
      t.metrics["dram__bytes_read.sum"] = 0.7 * bytes;
      t.metrics["dram__bytes_write.sum"] = 0.3 * bytes;
      t.metrics["smsp__inst_executed.sum"] = inst;
      t.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 100.0 * t_mem / std::max(t_mem, t_cmp);
      t.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 100.0 * t_cmp / std::max(t_mem, t_cmp);
      t.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 30.0 + 20.0 * c[0];
      t.metrics["static.registers"] = 32.0 + 8.0 * c[1];
      out.push_back(std::move(t));
    }
    return out;
  }
};

TEST(Operators, ClassifiesBottlenecks) {
  trial t;
  t.st = status::ok;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::unknown);
  t.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 85;
  t.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 90;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::memory);
  t.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 20;
  t.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 30;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::occupancy);
  t.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 80;
  t.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 75;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::compute);
  t.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 30;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::latency);
  t.st = status::wrong_result;
  EXPECT_EQ(strategies::classify_bottleneck(t), bottleneck::unknown);
}

TEST(Operators, FamiliesFromNames) {
  const auto f = strategies::parameter_families(synthetic_space());
  const std::vector<operator_family> expected = {operator_family::parallelism, operator_family::coarsening,
                                                 operator_family::vectorisation, operator_family::unrolling,
                                                 operator_family::memory, operator_family::other};
  EXPECT_EQ(f, expected);
}

TEST(Operators, MutationChangesOnlyTheFamilyAndTheBanditLearns) {
  const auto space = synthetic_space();
  strategies::operator_bandit b(space, 1.0);
  rng r(3);
  const config parent = {1, 1, 1, 0, 0, 1};
  for (int k = 0; k < 200; ++k) {
    const config c = b.mutate(space, parent, operator_family::vectorisation, r);
    EXPECT_NE(c, parent);
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (i != 2) {
        EXPECT_EQ(c[i], parent[i]);
      }
    }
  }
  // Rewards move the choice: memory-bound parents improved only by unrolling here.
  for (int k = 0; k < 60; ++k) {
    b.reward(bottleneck::memory, operator_family::unrolling, true);
    b.reward(bottleneck::memory, operator_family::vectorisation, false);
  }
  int unroll = 0;
  for (int k = 0; k < 200; ++k)
    unroll += b.choose(bottleneck::memory, r) == operator_family::unrolling ? 1 : 0;
  EXPECT_GT(unroll, 150);
  EXPECT_GT(b.success_rate(bottleneck::memory, operator_family::unrolling), 0.9);
}

// Every metric option of bo and hybrid's bandit: the run keeps the contract, is deterministic, and
// comes within 10% of the optimum of this small space (576 configurations) in 60 evaluations.
TEST(MetricStrategies, RunDeterministicallyAndFindTheOptimum) {
  register_builtins();
  const auto space = synthetic_space();
  const nlohmann::json outputs = {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__inst_executed.sum"};
  const std::vector<plugin_spec> specs = {
      {"bo", {{"metric_outputs", outputs}}, {}},
      {"bo", {{"metric_outputs", outputs}, {"kernel", "rbf"}}, {}},
      {"bo", {{"roofline_mean", true}}, {}},
      {"hybrid", {{"operators", "bandit"}}, {}},
  };
  double optimum = INFINITY;
  {
    synthetic_kernel k{&space};
    std::vector<evaluation_request> all;
    for (std::size_t i = 0; i < space.valid().size(); ++i)
      all.push_back({i, space.valid().at(i), 0});
    for (const auto& t : k.evaluate(all))
      optimum = std::min(optimum, t.time_ms);
  }
  for (const auto& spec : specs) {
    std::vector<std::vector<config>> runs;
    for (int rep = 0; rep < 2; ++rep) {
      auto s = strategy_registry().create(spec);
      evaluator e{synthetic_kernel{&space}};
      budget_spec b;
      b.evaluations = 60;
      const auto r = run_loop(space, s, e, b, 5, 3, nullptr, {});
      ASSERT_EQ(r.history.size(), 60u) << spec.params.dump();
      std::vector<config> seq;
      std::set<config> distinct;
      for (const auto& t : r.history.trials()) {
        seq.push_back(t.cfg);
        EXPECT_TRUE(distinct.insert(t.cfg).second);
      }
      EXPECT_LT(r.history.best()->time_ms, 1.1 * optimum) << spec.type << spec.params.dump();
      runs.push_back(seq);
    }
    EXPECT_EQ(runs[0], runs[1]) << spec.type << spec.params.dump();
  }
}

// Configurations that fail to compile unless block_size_x, tile_size_x, loop_unroll take one value each and
// method is not 1 (12 of 576 run): a space where the first draws often all fail, as TritonBench-G's
// attention_score (4 correct of 73 measured configurations).
void mostly_failing(trial& t) {
  const auto& c = t.cfg;
  const bool runs = c[0] == 2 && c[1] == 2 && c[5] != 1 && c[3] == 0;
  t.st = runs ? status::ok : status::compile_failed;
  t.time_ms = runs ? 1.0 + 0.1 * c[2] : INFINITY;
}

TEST(Hybrid, DrawsUniformlyUntilAConfigurationRuns) {
  // Children of failures inherit what made them fail: with no correct trial yet, hybrid draws as random
  // search does. Over 40 seeds, 30 evaluations each, it finds a running configuration about as often as
  // random search (before: far less often, its offspring bred from failing parents).
  register_builtins();
  const auto space = synthetic_space();
  auto found = [&](const plugin_spec& spec) {
    int hits = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      auto s = strategy_registry().create(spec);
      evaluator e{test::trial_filler{mostly_failing}};
      budget_spec b;
      b.evaluations = 30;
      const auto r = run_loop(space, s, e, b, seed, 1, nullptr, {});
      hits += r.history.best() != nullptr;
    }
    return hits;
  };
  const int hybrid = found({"hybrid", {}, {}});
  const int random = found({"random", {}, {}});
  // P(30 uniform draws without repeats find one of the 12 in 576) = 0.48: about 19 of 40 seeds (10
  // draws: 0.19, what hybrid's initial design alone gives). Before the change hybrid found one on 7.
  EXPECT_GE(random, 12);
  EXPECT_GE(hybrid, random - 6) << "hybrid " << hybrid << " random " << random;
}

}  // namespace
}  // namespace kf
