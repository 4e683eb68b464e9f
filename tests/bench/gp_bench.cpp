// Benchmarks of kf::gp and kf::acquisition at the sizes of a Bayesian-optimisation run: d = 8, n
// training points in {100, 250, 500, 1000, 2000}, m candidates in {1e3, 1e4, 1e5}. The goal of the
// project is fit + acquisition over 1e5 candidates in < 200 ms at n = 1000 (docs/gp.md has the table
// and the command).
//
// The data imitate a run: half the points uniform in [0,1]^8, half clustered around the optimum (as a
// search that exploits produces); targets a smooth bowl with ripples plus 1% noise; candidates
// uniform.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "kforge/acquisition.hpp"
#include "kforge/gp.hpp"
#include "kforge/random.hpp"

namespace {

constexpr Eigen::Index kDim = 8;

struct dataset {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
};

dataset make_data(Eigen::Index n, std::uint64_t seed) {
  kf::rng r(seed);
  dataset d{Eigen::MatrixXd(n, kDim), Eigen::VectorXd(n)};
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < kDim; ++j) {
      const double v = i % 2 ? r.uniform() : 0.3 + 0.1 * r.normal();
      d.X(i, j) = std::fmin(1.0, std::fmax(0.0, v));
    }
    double f = 0;
    for (Eigen::Index j = 0; j < kDim; ++j)
      f += (1.0 + 0.25 * static_cast<double>(j)) * std::pow(d.X(i, j) - 0.3, 2);
    d.y(i) = f + 0.2 * std::sin(5 * d.X(i, 0)) + 0.05 * std::cos(9 * d.X(i, 1)) + 0.01 * r.normal();
  }
  return d;
}

Eigen::MatrixXd make_candidates(Eigen::Index m, std::uint64_t seed) {
  kf::rng r(seed);
  Eigen::MatrixXd C(m, kDim);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < kDim; ++j)
      C(i, j) = r.uniform();
  return C;
}

kf::gp fitted(Eigen::Index n, int restarts = 3) {
  const dataset d = make_data(n, 1);
  kf::gp g(kDim, {.restarts = restarts, .seed = 2});
  g.fit(d.X, d.y);
  return g;
}

// A fit from the default hyperparameters (a fresh GP), with the default 3 runs.
void BM_fit_cold(benchmark::State& state) {
  const dataset d = make_data(state.range(0), 1);
  int evaluations = 0;
  for (auto _ : state) {
    kf::gp g(kDim, {.seed = 2});
    g.fit(d.X, d.y);
    evaluations = g.last_fit().evaluations;
    benchmark::DoNotOptimize(g.hyper());
  }
  state.counters["evals"] = evaluations;
}
BENCHMARK(BM_fit_cold)
    ->Arg(100)
    ->Arg(250)
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A refit of a GP that was already fitted on (nearly) the same data: the BO loop after a batch.
// range(1) = restarts (1: the warm start only).
void BM_refit_warm(benchmark::State& state) {
  const dataset d = make_data(state.range(0), 1);
  kf::gp g(kDim, {.restarts = static_cast<int>(state.range(1)), .seed = 2});
  g.fit(d.X, d.y);
  int evaluations = 0;
  for (auto _ : state) {
    g.fit(d.X, d.y);
    evaluations = g.last_fit().evaluations;
  }
  state.counters["evals"] = evaluations;
}
BENCHMARK(BM_refit_warm)
    ->ArgsProduct({{100, 250, 500, 1000, 2000}, {1, 3}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Only the factorisation (fit_fixed).
void BM_fit_fixed(benchmark::State& state) {
  const dataset d = make_data(state.range(0), 1);
  kf::gp g = fitted(state.range(0));
  const kf::gp_hyper h = g.hyper();
  for (auto _ : state)
    g.fit_fixed(d.X, d.y, h);
}
BENCHMARK(BM_fit_fixed)
    ->Arg(100)
    ->Arg(250)
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_predict_mean(benchmark::State& state) {
  const kf::gp g = fitted(state.range(0));
  const Eigen::MatrixXd C = make_candidates(state.range(1), 3);
  Eigen::VectorXd mean(C.rows());
  for (auto _ : state) {
    g.predict_mean(C, mean);
    benchmark::DoNotOptimize(mean.data());
  }
}
BENCHMARK(BM_predict_mean)
    ->ArgsProduct({{100, 250, 500, 1000, 2000}, {1000, 10000, 100000}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Mean and exact variance at every candidate: O(m n^2).
void BM_predict(benchmark::State& state) {
  const kf::gp g = fitted(state.range(0));
  const Eigen::MatrixXd C = make_candidates(state.range(1), 3);
  Eigen::VectorXd mean(C.rows()), var(C.rows());
  for (auto _ : state) {
    g.predict(C, mean, var);
    benchmark::DoNotOptimize(var.data());
  }
}
BENCHMARK(BM_predict)
    ->ArgsProduct({{100, 250, 500, 1000, 2000}, {1000, 10000, 100000}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The acquisition step: argmax of log-EI over the candidates (pruned: exact variances only where the
// bound leaves a chance). Counters: "exact" = candidates whose exact variance was computed, "refined" =
// candidates that got the 16-neighbour bound.
void BM_select_log_ei(benchmark::State& state) {
  const kf::gp g = fitted(state.range(0));
  const Eigen::MatrixXd C = make_candidates(state.range(1), 3);
  std::size_t exact = 0, refined = 0;
  for (auto _ : state) {
    const auto s = kf::acquisition::select(g, C, {.type = kf::acquisition::kind::log_ei}, 1);
    exact = s.exact_variances;
    refined = s.refined_bounds;
    benchmark::DoNotOptimize(s.top.data());
  }
  state.counters["exact"] = static_cast<double>(exact);
  state.counters["refined"] = static_cast<double>(refined);
}
BENCHMARK(BM_select_log_ei)
    ->ArgsProduct({{100, 250, 500, 1000, 2000}, {1000, 10000, 100000}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A batch of 8 pending points by kriging believer (the copy of the GP included).
void BM_condition_on_pending(benchmark::State& state) {
  const kf::gp g = fitted(state.range(0));
  const Eigen::MatrixXd pending = make_candidates(8, 4);
  for (auto _ : state) {
    const kf::gp kb = g.condition_on_pending(pending);
    benchmark::DoNotOptimize(kb.size());
  }
}
BENCHMARK(BM_condition_on_pending)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(2000)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The goal: one BO step at n = 1000 = refit (warm; range(1) restarts) + log-EI argmax over range(0)
// candidates.
void BM_step(benchmark::State& state) {
  const dataset d = make_data(1000, 1);
  kf::gp g(kDim, {.restarts = static_cast<int>(state.range(1)), .seed = 2});
  g.fit(d.X, d.y);
  const Eigen::MatrixXd C = make_candidates(state.range(0), 3);
  for (auto _ : state) {
    g.fit(d.X, d.y);
    const auto s = kf::acquisition::select(g, C, {.type = kf::acquisition::kind::log_ei}, 1);
    benchmark::DoNotOptimize(s.top.data());
  }
}
BENCHMARK(BM_step)
    ->ArgsProduct({{10000, 100000}, {1, 3}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The log-EI spec with sparse screening (docs/gp.md, "Sparse screening"): range = screen_keep.
kf::acquisition::spec sparse_spec(std::size_t keep, std::uint64_t seed = 5) {
  kf::acquisition::spec s{.type = kf::acquisition::kind::log_ei};
  s.screen = kf::acquisition::screening::sparse;
  s.screen_keep = keep;
  s.sparse.seed = seed;
  return s;
}

// BM_step with the sparse screening (default options, screen_keep = range(2)): refit (warm, range(1)
// restarts) + log-EI argmax over range(0) candidates.
void BM_step_sparse(benchmark::State& state) {
  const dataset d = make_data(1000, 1);
  kf::gp g(kDim, {.restarts = static_cast<int>(state.range(1)), .seed = 2});
  g.fit(d.X, d.y);
  const Eigen::MatrixXd C = make_candidates(state.range(0), 3);
  const auto spec = sparse_spec(static_cast<std::size_t>(state.range(2)));
  std::size_t exact = 0;
  for (auto _ : state) {
    g.fit(d.X, d.y);
    const auto s = kf::acquisition::select(g, C, spec, 1);
    exact = s.exact_variances;
    benchmark::DoNotOptimize(s.top.data());
  }
  state.counters["exact"] = static_cast<double>(exact);
}
BENCHMARK(BM_step_sparse)
    ->ArgsProduct({{10000, 100000}, {1, 3}, {2048}})
    ->Args({100000, 1, 256})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The parts of the sparse step at n = 1000 over 1e5 candidates: building the approximation (k-means++,
// factorisations, the variance's projection) and predicting every candidate with it.
void BM_sparse_build(benchmark::State& state) {
  const kf::gp g = fitted(1000, 1);
  for (auto _ : state) {
    const kf::gp_sparse s = g.sparse_approximation({.seed = 5});
    benchmark::DoNotOptimize(s.inducing().data());
  }
}
BENCHMARK(BM_sparse_build)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_sparse_predict(benchmark::State& state) {
  const kf::gp g = fitted(1000, 1);
  const kf::gp_sparse s = g.sparse_approximation({.seed = 5});
  const Eigen::MatrixXd C = make_candidates(state.range(0), 3);
  Eigen::VectorXd mean(C.rows()), var(C.rows());
  for (auto _ : state) {
    s.predict(C, mean, var);
    benchmark::DoNotOptimize(var.data());
  }
}
BENCHMARK(BM_sparse_predict)
    ->Arg(100000)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Quality of the sparse screening, not speed (one iteration; minutes): 50 seeded problems at n = 1000
// over 1e5 candidates, the exact log-EI argmax (pruned select, = brute force) against the screened one
// for screen_keep in {256, 1024, 2048}. range(0) = 0: the data generator above; 1: the same plus
// high-frequency terms (fitted length scales ~0.5-2 instead of ~4-8), a harder surface for 128
// inducing points. Counters: match_K = fraction of problems whose screened choice is the exact argmax;
// ratio_K_med / _p5 / _min = exact EI of the screened choice over the maximum exact EI (median, 5th
// percentile, minimum); rank_med / rank_max = rank of the exact argmax under the sparse GP's log-EI
// (0 = first; it is kept when rank < screen_keep).
void BM_sparse_quality(benchmark::State& state) {
  constexpr int problems = 50;
  const std::size_t keeps[] = {256, 1024, 2048};
  const bool rough = state.range(0) != 0;
  std::vector<double> ratio[3], rank;
  int match[3] = {0, 0, 0};
  for (auto _ : state) {
    for (int p = 0; p < problems; ++p) {
      dataset d = make_data(1000, 100 + static_cast<std::uint64_t>(p));
      if (rough)
        for (Eigen::Index i = 0; i < d.X.rows(); ++i)
          d.y(i) += 0.3 * std::sin(15 * d.X(i, 0)) * std::cos(12 * d.X(i, 1)) +
                    0.2 * std::sin(11 * d.X(i, 2) + 7 * d.X(i, 3));
      kf::gp g(kDim, {.restarts = 1, .seed = 2});
      g.fit(d.X, d.y);
      const Eigen::MatrixXd C = make_candidates(100000, 1000 + static_cast<std::uint64_t>(p));
      const kf::acquisition::spec exact_spec{.type = kf::acquisition::kind::log_ei};
      const kf::acquisition::choice exact = kf::acquisition::select(g, C, exact_spec, 1).top.front();
      for (int k = 0; k < 3; ++k) {
        const auto s =
            kf::acquisition::select(g, C, sparse_spec(keeps[k], 5 + static_cast<std::uint64_t>(p)), 1);
        match[k] += s.top.front().index == exact.index;
        ratio[k].push_back(std::exp(s.top.front().score - exact.score));
      }
      // The exact argmax's rank under the screen's own scores.
      const kf::gp_sparse approx = g.sparse_approximation({.seed = 5 + static_cast<std::uint64_t>(p)});
      Eigen::VectorXd mean(C.rows()), var(C.rows()), sc(C.rows());
      approx.predict(C, mean, var);
      kf::acquisition::score(exact_spec, g.best_target(), mean, var, sc);
      const double w = sc(static_cast<Eigen::Index>(exact.index));
      rank.push_back(static_cast<double>((sc.array() > w).count()));
    }
  }
  const auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  for (int k = 0; k < 3; ++k) {
    const std::string K = std::to_string(keeps[k]);
    state.counters["match_" + K] = static_cast<double>(match[k]) / problems;
    state.counters["ratio_" + K + "_med"] = quantile(ratio[k], 0.5);
    state.counters["ratio_" + K + "_p5"] = quantile(ratio[k], 0.05);
    state.counters["ratio_" + K + "_min"] = quantile(ratio[k], 0.0);
  }
  state.counters["rank_med"] = quantile(rank, 0.5);
  state.counters["rank_max"] = quantile(rank, 1.0);
}
BENCHMARK(BM_sparse_quality)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

}  // namespace
