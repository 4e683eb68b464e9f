// Benchmarks of the core (issue 2, item 10): space enumeration, store commits, strategy overhead.
// Run: build/kforge_bench --benchmark_filter='enumerate|store|strategy'   (results: docs/benchmarks.md)
#include <benchmark/benchmark.h>

#include <filesystem>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/problem.hpp"
#include "kforge/evaluators/replay.hpp"
#include "kforge/space.hpp"
#include "kforge/store.hpp"

namespace {

using namespace kf;

// benchmark_hub's hotspot space (4.44 million combinations, 82,984 valid), built in code so that the
// benchmark runs without ../shared; the T1 file gives the same space (tests/unit/space_test.cpp).
search_space hotspot() {
  std::vector<value> bx{1, 2, 4, 8, 16};
  for (int v = 32; v <= 1024; v += 32)
    bx.emplace_back(v);
  std::vector<value> ten;
  for (int i = 1; i <= 10; ++i)
    ten.emplace_back(i);
  std::vector<param> ps;
  ps.push_back(make_param("grid_width", param_type::integer, {4096}));
  ps.push_back(make_param("grid_height", param_type::integer, {4096}));
  ps.push_back(make_param("block_size_x", param_type::integer, bx));
  ps.push_back(make_param("block_size_y", param_type::integer, {1, 2, 4, 8, 16, 32}));
  ps.push_back(make_param("tile_size_x", param_type::integer, ten));
  ps.push_back(make_param("tile_size_y", param_type::integer, ten));
  ps.push_back(make_param("temporal_tiling_factor", param_type::integer, ten));
  ps.push_back(make_param("max_tfactor", param_type::integer, {10}));
  ps.push_back(make_param("loop_unroll_factor_t", param_type::integer, ten));
  ps.push_back(make_param("sh_power", param_type::integer, {0, 1}));
  return search_space(std::move(ps),
                      {"block_size_x*block_size_y>= 32", "temporal_tiling_factor % loop_unroll_factor_t == 0",
                       "block_size_x*block_size_y <= 1024",
                       "(block_size_x*tile_size_x+ temporal_tiling_factor * 2) * (block_size_y*tile_size_y+ "
                       "temporal_tiling_factor * 2) * (2+sh_power) * 4 <= 49152"});
}

void enumerate_hotspot(benchmark::State& state) {
  std::size_t n = 0;
  for (auto _ : state) {
    const auto sp = hotspot();  // a fresh space: enumeration is cached per space
    n = sp.valid().size();
    benchmark::DoNotOptimize(n);
  }
  state.counters["valid"] = static_cast<double>(n);
  state.counters["combinations"] = 4440000;
}
BENCHMARK(enumerate_hotspot)->Unit(benchmark::kMillisecond)->UseRealTime();

// Constraint checks of single configurations (what a strategy pays outside enumerated spaces).
void check_configuration(benchmark::State& state) {
  const auto sp = hotspot();
  rng r(1);
  std::vector<config> cs;
  for (int i = 0; i < 1024; ++i)
    cs.push_back(sp.sample_unconstrained(r));
  std::size_t i = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(sp.check(cs[i++ & 1023]));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(check_configuration);

void store_commit(benchmark::State& state) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kforge-bench-store-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  run_store st(dir);
  trial t;
  t.st = status::ok;
  t.cfg = {1, 2, 3, 4, 5};
  t.times_ms.assign(32, 1.25);
  t.time_ms = 1.25;
  t.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 71.0;
  t.metrics["static.registers"] = 32;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    t.sequence = seq;
    t.cfg[0] = static_cast<std::uint32_t>(seq);  // distinct configurations
    st.commit(t);
    ++seq;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  std::filesystem::remove_all(dir);
}
BENCHMARK(store_commit)->UseRealTime();

// Strategy overhead per proposal, on the hotspot space with a synthetic objective (no evaluator cost).
struct synthetic_evaluator {
  std::vector<trial> evaluate(std::span<const evaluation_request> batch) const {
    std::vector<trial> out;
    for (const auto& r : batch) {
      trial t;
      t.sequence = r.sequence;
      t.cfg = r.cfg;
      t.st = status::ok;
      double x = 1;
      for (std::size_t i = 0; i < r.cfg.size(); ++i)
        x += (static_cast<double>(r.cfg[i]) - 3.0) * (static_cast<double>(r.cfg[i]) - 3.0) *
             static_cast<double>(i + 1);
      t.time_ms = x;
      t.cost.benchmark = 1;
      out.push_back(std::move(t));
    }
    return out;
  }
};

void strategy_overhead(benchmark::State& state, const std::string& name) {
  register_builtins();
  const auto sp = hotspot();
  sp.valid();  // enumeration is not part of the strategy's cost
  const std::size_t evals = 500;
  for (auto _ : state) {
    auto s = strategy_registry().create({name, {}, {}});
    evaluator e(synthetic_evaluator{});
    budget_spec b;
    b.evaluations = evals;
    auto r = run_loop(sp, s, e, b, 1, 1, nullptr, {});
    benchmark::DoNotOptimize(r.history.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * evals));
  state.SetLabel("per item = one proposal + its bookkeeping");
}
BENCHMARK_CAPTURE(strategy_overhead, random, std::string("random"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(strategy_overhead, ga, std::string("ga"))->Unit(benchmark::kMillisecond);

}  // namespace
