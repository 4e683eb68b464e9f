// What a strategy written in Python costs per proposal (issue 13): propose(n) + observe(n trials) through
// kf::strategy, for the C++ random search and for Python strategies reached through strategy type "python"
// (the embedded interpreter the CLI uses; libkforge_python.so). Results and the command: docs/plugins.md.
//   build/kforge_bench --benchmark_filter=python_crossing
#include <benchmark/benchmark.h>

#include "kforge/kforge.hpp"
#include "kforge/strategy.hpp"

namespace {

using namespace kf;

search_space bench_space() {
  // 4 x 8 x 8 x 16 x 32 = 131,072 configurations, every other one valid: enough that no run exhausts it.
  std::vector<param> ps;
  ps.push_back(make_param("a", param_type::integer, {1, 2, 4, 8}));
  std::vector<value> v8, v16, v32;
  for (int i = 0; i < 8; ++i)
    v8.emplace_back(i);
  for (int i = 0; i < 16; ++i)
    v16.emplace_back(i);
  for (int i = 0; i < 32; ++i)
    v32.emplace_back(i);
  ps.push_back(make_param("b", param_type::integer, v8));
  ps.push_back(make_param("c", param_type::integer, v8));
  ps.push_back(make_param("d", param_type::integer, v16));
  ps.push_back(make_param("e", param_type::integer, v32));
  return search_space(std::move(ps), {"(b + c + d + e) % 2 == 0"});
}

void python_crossing(benchmark::State& state, plugin_spec spec) {
#ifndef KFORGE_HAVE_PYTHON
  if (spec.type == "python") {
    state.SkipWithError("kforge was built without its Python module");
    return;
  }
#endif
  register_builtins();
  static const search_space space = bench_space();
  (void)space.valid();
  const auto batch = static_cast<std::size_t>(state.range(0));
  auto s = strategy_registry().create(spec);
  std::uint64_t seed = 1;
  s.initialize(space, seed);
  run_history h;
  std::uint64_t seq = 0;
  std::int64_t proposals = 0;
  for (auto _ : state) {
    if (h.size() + batch > 60'000) {  // start over before the space runs out (not timed)
      state.PauseTiming();
      h = run_history();
      s.initialize(space, ++seed);
      state.ResumeTiming();
    }
    auto props = s.propose(search_state(space, h, {}, std::nullopt), batch);
    const std::size_t first = h.size();
    for (auto& c : props) {
      trial t;
      t.sequence = seq++;
      t.cfg = std::move(c);
      t.st = status::ok;
      t.time_ms = 1.0 + static_cast<double>(seq % 7);
      h.add(std::move(t));
    }
    s.observe(search_state(space, h, {}, std::nullopt),
              std::span<const trial>(h.trials().data() + first, h.size() - first));
    proposals += static_cast<std::int64_t>(props.size());
  }
  state.counters["us_per_proposal"] = benchmark::Counter(
      static_cast<double>(proposals) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

const std::string bench_dir = KFORGE_SOURCE_DIR "/tests/bench/";
const std::string examples = KFORGE_SOURCE_DIR "/examples/python/";

BENCHMARK_CAPTURE(python_crossing, cpp_random, plugin_spec{"random", nlohmann::json::object(), {}})
    ->Arg(1)
    ->Arg(8)
    ->Arg(64);
BENCHMARK_CAPTURE(python_crossing, python_minimal,
                  plugin_spec{"python",
                              {{"module", bench_dir + "python_strategy_bench.py"}, {"class", "Minimal"}},
                              {}})
    ->Arg(1)
    ->Arg(8)
    ->Arg(64);
BENCHMARK_CAPTURE(python_crossing, python_neighbour_walk,
                  plugin_spec{
                      "python", {{"module", examples + "neighbour_walk.py"}, {"class", "NeighbourWalk"}}, {}})
    ->Arg(1)
    ->Arg(8)
    ->Arg(64);

}  // namespace
