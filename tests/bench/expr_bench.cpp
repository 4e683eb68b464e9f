// Benchmarks of kf::expression::evaluate() and test() on typical tuning-space constraints: the hot
// path of enumerating search spaces with millions of configurations.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kforge/expr.hpp"

namespace {

struct constraint_case {
  const char* text;
  std::vector<kf::value> values;  // one per free name, in free_names() order
};

// Bindings chosen so that short-circuiting does not skip the interesting part.
const constraint_case kCases[] = {
    {"block_size_x*block_size_y<=1024", {32, 16}},
    {"32 <= block_size_x * block_size_y <= 1024", {32, 16}},
    {"use_shmem == 0 or "
     "(((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+(filter_height-"
     "1)))) < 12*1024",
     {1, 32, 2, 15, 8, 4, 15}},
    {"KWG % ((MDIMC * NDIMC)/MDIMA) == 0", {64, 16, 16, 8}},
    {"MWG % (MDIMC * VWM) == 0 and NWG % (NDIMC * VWN) == 0", {64, 16, 2, 64, 8, 4}},
    {"block_size_x in [32, 64, 128] and tile_size_x <= 4", {64, 2}},
    {"min(block_size_x, 64) * tile_size_x >= 64", {32, 4}},
};

// Pointers to the bound values, as a search-space enumerator would hold them.
struct bound_case {
  explicit bound_case(std::size_t i) : expr(kf::expression::parse(kCases[i].text)), values(kCases[i].values) {
    for (const auto& v : values)
      slots.push_back(&v);
  }
  kf::expression expr;
  std::vector<kf::value> values;
  std::vector<const kf::value*> slots;
};

void bm_expr_evaluate(benchmark::State& state) {
  const bound_case c(static_cast<std::size_t>(state.range(0)));
  state.SetLabel(kCases[state.range(0)].text);
  for (auto _ : state) {
    kf::value v = c.expr.evaluate(c.slots);
    benchmark::DoNotOptimize(v);
  }
}

void bm_expr_test(benchmark::State& state) {
  const bound_case c(static_cast<std::size_t>(state.range(0)));
  state.SetLabel(kCases[state.range(0)].text);
  for (auto _ : state) {
    bool b = c.expr.test(c.slots);
    benchmark::DoNotOptimize(b);
  }
}

// The generic path: a value list expression with a comprehension (not a hot path; for reference).
void bm_expr_evaluate_list(benchmark::State& state) {
  const auto e = kf::expression::parse("[2**i for i in range(0, n)]");
  const kf::value n(6);
  const kf::value* slots[] = {&n};
  for (auto _ : state) {
    kf::value v = e.evaluate(slots);
    benchmark::DoNotOptimize(v);
  }
}

void bm_expr_parse(benchmark::State& state) {
  const std::string text = kCases[2].text;
  for (auto _ : state) {
    auto e = kf::expression::parse(text);
    benchmark::DoNotOptimize(e);
  }
}

void all_cases(benchmark::internal::Benchmark* b) {
  for (std::size_t i = 0; i < std::size(kCases); ++i)
    b->Arg(static_cast<std::int64_t>(i));
}

}  // namespace

BENCHMARK(bm_expr_evaluate)->Apply(all_cases);
BENCHMARK(bm_expr_test)->Apply(all_cases);
BENCHMARK(bm_expr_evaluate_list);
BENCHMARK(bm_expr_parse);
