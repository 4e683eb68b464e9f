// Every registered strategy, with its default options, on replay of a recorded space:
//   - never proposes an invalid, duplicate or already-measured configuration, nor more than asked;
//   - respects the evaluation budget, for batch sizes 1 and 8;
//   - gives the same trial sequence for the same seed, and (as a sanity check) another for another seed;
//   - keeps proposing until the space is exhausted when the budget allows it;
//   - takes a run's start configurations (observed, never proposed) through the loop, which checks
//     the contract of every proposal;
//   - proposes on spaces too large to enumerate, without enumerating them.
// The contract is checked directly here (not through the experiment loop, which also enforces it).
// Besides every registered strategy with its defaults, the Python example strategies
// (examples/python/neighbour_walk.py and tpe.py, through strategy type "python" and the embedded
// interpreter) run the same checks; they are skipped, with the reason, where kforge was built without its
// Python module.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/replay_fixture.hpp"

namespace kf {
namespace {

// A strategy under test: a label (the test's name) and the {type, params} that creates it.
struct strategy_case {
  std::string label;
  plugin_spec spec;
};

void PrintTo(const strategy_case& c, std::ostream* os) {
  *os << c.label;
}

class conformance : public ::testing::TestWithParam<strategy_case> {
 protected:
  void SetUp() override {
#ifndef KFORGE_HAVE_PYTHON
    if (GetParam().spec.type == "python")
      GTEST_SKIP()
          << "kforge was built without its Python module (nanobind in <repo>/.venv: scripts/install-deps)";
#endif
  }
};

struct checked_run {
  std::vector<config> sequence;
};

// Drives the strategy by hand, checking every proposal against the contract.
checked_run drive(const strategy_case& sc, std::uint64_t seed, std::size_t budget, std::size_t batch) {
  const auto& name = sc.label;
  test::stencil_replay f;
  const auto& space = f.prob.space;
  auto s = strategy_registry().create(sc.spec);
  auto e = f.make_evaluator();
  s.initialize(space, seed);
  run_history h;
  checked_run out;
  std::uint64_t seq = 0;
  while (h.size() < budget) {
    const std::size_t left = budget - h.size();
    const search_state st(space, h, {}, left);
    if (s.finished(st)) break;
    const std::size_t n = std::min(batch, left);
    auto props = s.propose(st, n);
    EXPECT_LE(props.size(), n) << name;
    std::set<config> distinct;
    for (const auto& c : props) {
      EXPECT_TRUE(space.is_valid(c)) << name << " proposed an invalid configuration";
      EXPECT_FALSE(h.measured(c)) << name << " proposed a measured configuration " << space.describe(c);
      EXPECT_TRUE(distinct.insert(c).second) << name << " proposed a configuration twice in a batch";
    }
    if (props.empty()) break;
    std::vector<evaluation_request> reqs;
    for (auto& c : props)
      reqs.push_back({seq++, c, 0});
    auto trials = e.evaluate(reqs);
    for (auto& t : trials) {
      out.sequence.push_back(t.cfg);
      h.add(std::move(t));
    }
    s.observe(search_state(space, h, {}, std::nullopt),
              std::span<const trial>(h.trials().data() + h.size() - props.size(), props.size()));
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_LE(h.size(), budget);
  return out;
}

TEST_P(conformance, never_invalid_duplicate_or_measured_and_respects_budget) {
  for (std::size_t batch : {1, 8}) {
    const auto r = drive(GetParam(), 3, 120, batch);
    EXPECT_EQ(r.sequence.size(), 120u) << GetParam().label << " stopped early with batch " << batch;
  }
}

TEST_P(conformance, same_seed_same_sequence) {
  for (std::size_t batch : {1, 5}) {
    const auto a = drive(GetParam(), 11, 80, batch);
    const auto b = drive(GetParam(), 11, 80, batch);
    const auto c = drive(GetParam(), 12, 80, batch);
    EXPECT_EQ(a.sequence, b.sequence) << GetParam().label;
    // brute_force is deterministic by design (lexicographic order); every other strategy uses its seed.
    if (GetParam().label != "brute_force") {
      EXPECT_NE(a.sequence, c.sequence) << GetParam().label << " ignores its seed";
    }
  }
}

TEST_P(conformance, same_seed_same_run_through_the_loop) {
  test::stencil_replay f;
  budget_spec b;
  b.evaluations = 60;
  std::vector<std::vector<config>> seqs;
  for (int k = 0; k < 2; ++k) {
    auto s = strategy_registry().create(GetParam().spec);
    auto e = f.make_evaluator();
    const auto r = run_loop(f.prob.space, s, e, b, 21, 4, nullptr, {});
    std::vector<config> seq;
    for (const auto& t : r.history.trials())
      seq.push_back(t.cfg);
    seqs.push_back(seq);
  }
  EXPECT_EQ(seqs[0], seqs[1]);
}

TEST_P(conformance, can_exhaust_a_space) {
  const auto r = drive(GetParam(), 5, 1000, 16);
  test::stencil_replay f;
  EXPECT_EQ(r.sequence.size(), f.prob.space.valid().size())
      << GetParam().label << " stopped before the space was exhausted";
}

// A run with start configurations (an experiment's `start:`): they are evaluated first, the strategy
// observes them without having proposed them, and then must never propose them (the loop throws at a
// contract breach), up to exhausting the space.
TEST_P(conformance, takes_start_configurations_it_did_not_propose) {
  test::stencil_replay f;
  const auto& valid = f.prob.space.valid();
  ASSERT_GT(valid.size(), 40u);
  run_options o;
  o.start = {valid.at(7), valid.at(valid.size() / 2), valid.at(valid.size() - 1)};
  // Batch 1 for a while; batch 8 until the space is exhausted (the strategy's own order reaches them).
  for (std::size_t batch : {1, 8}) {
    const bool exhaust = batch > 1;
    auto s = strategy_registry().create(GetParam().spec);
    auto e = f.make_evaluator();
    budget_spec b;
    b.evaluations = exhaust ? valid.size() + 10 : 40;
    run_result r;
    ASSERT_NO_THROW(r = run_loop(f.prob.space, s, e, b, 9, batch, nullptr, o)) << GetParam().label;
    ASSERT_GE(r.history.size(), o.start.size());
    for (std::size_t i = 0; i < o.start.size(); ++i)
      EXPECT_EQ(r.history.trials()[i].cfg, o.start[i]) << GetParam().label << " batch " << batch;
    EXPECT_EQ(r.history.size(), exhaust ? valid.size() : 40u)
        << GetParam().label << " stopped early (batch " << batch << ")";
  }
}

// The start configurations are among the strategy's own first picks (its second and fifth proposals
// without them), and the batch is larger than the start list: the strategy is asked while they are
// still pending and must leave them out.
TEST_P(conformance, leaves_out_pending_start_configurations_it_would_have_picked) {
  test::stencil_replay f;
  budget_spec b;
  b.evaluations = 8;
  auto first = strategy_registry().create(GetParam().spec);
  auto e0 = f.make_evaluator();
  const auto own = run_loop(f.prob.space, first, e0, b, 13, 8, nullptr, {});
  ASSERT_EQ(own.history.size(), 8u);
  run_options o;
  o.start = {own.history.trials()[1].cfg, own.history.trials()[4].cfg};
  b.evaluations = 40;
  auto s = strategy_registry().create(GetParam().spec);
  auto e = f.make_evaluator();
  run_result r;
  ASSERT_NO_THROW(r = run_loop(f.prob.space, s, e, b, 13, 8, nullptr, o)) << GetParam().label;
  ASSERT_EQ(r.history.size(), 40u) << GetParam().label;
  EXPECT_EQ(r.history.trials()[0].cfg, o.start[0]);
  EXPECT_EQ(r.history.trials()[1].cfg, o.start[1]);
}

// Spaces too large to enumerate (TritonBench-G's chunk_gla_fwd: 12 knobs, 5.3e8 combinations; its runs
// failed with "more than 200000000 valid configurations, too many to enumerate"): 12 parameters of 5
// values (2.4e8 combinations), without constraints and with one that holds everywhere. Every strategy
// proposes valid, distinct, unmeasured configurations up to its budget, and the constrained space is
// never enumerated (that would take seconds and 8 bytes a configuration).
search_space twelve_knobs(std::vector<std::string> constraints) {
  std::vector<param> ps;
  for (int i = 0; i < 12; ++i)
    ps.push_back(make_param("k" + std::to_string(i), param_type::integer, {1, 2, 4, 8, 16}));
  return search_space(std::move(ps), std::move(constraints));
}

TEST_P(conformance, proposes_on_a_space_too_large_to_enumerate) {
  for (bool constrained : {false, true}) {
    const auto space =
        twelve_knobs(constrained ? std::vector<std::string>{"k0 * k1 >= 1"} : std::vector<std::string>{});
    ASSERT_GT(space.cartesian_size(), static_cast<double>(search_space::max_valid_configs()));
    auto s = strategy_registry().create(GetParam().spec);
    s.initialize(space, 17);
    run_history h;
    std::uint64_t seq = 0;
    while (h.size() < 40) {
      const search_state st(space, h, {}, 40 - h.size());
      auto props = s.propose(st, std::min<std::size_t>(4, 40 - h.size()));
      ASSERT_FALSE(props.empty()) << GetParam().label << " proposed nothing after " << h.size() << " trials";
      std::set<config> distinct;
      for (auto& c : props) {
        ASSERT_TRUE(space.is_valid(c)) << GetParam().label;
        ASSERT_FALSE(h.measured(c)) << GetParam().label << " proposed a measured configuration";
        ASSERT_TRUE(distinct.insert(c).second) << GetParam().label << " proposed a configuration twice";
        trial t;
        t.sequence = seq++;
        t.cfg = c;
        t.st = status::ok;
        t.time_ms = 1.0;
        for (std::size_t p = 0; p < c.size(); ++p)
          t.time_ms += std::abs(static_cast<double>(c[p]) - 2.0);  // a bowl around the middle values
        t.times_ms = {t.time_ms};
        h.add(std::move(t));
      }
      s.observe(search_state(space, h, {}, std::nullopt),
                std::span<const trial>(h.trials().data() + h.size() - props.size(), props.size()));
    }
    EXPECT_EQ(h.size(), 40u);
    if (constrained) {
      EXPECT_FALSE(space.enumerated()) << GetParam().label << " enumerated the space";
    }
  }
}

std::vector<strategy_case> registered() {
  register_builtins();
  std::vector<strategy_case> out;
  for (const auto& name : strategy_registry().names())
    if (name != "python") out.push_back({name, {name, nlohmann::json::object(), {}}});
  // The Python example, with its default options.
  out.push_back({"python_neighbour_walk",
                 {"python",
                  {{"module", (test::source_dir() / "examples/python/neighbour_walk.py").string()},
                   {"class", "NeighbourWalk"}},
                  {"conformance", "strategy"}}});
  // The Python TPE example (numpy), with fewer uniform draws so that its densities are exercised.
  out.push_back({"python_tpe",
                 {"python",
                  {{"module", (test::source_dir() / "examples/python/tpe.py").string()},
                   {"class", "TPE"},
                   {"startup", 3}},
                  {"conformance", "strategy"}}});
  return out;
}

INSTANTIATE_TEST_SUITE_P(all_strategies, conformance, ::testing::ValuesIn(registered()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace kf
