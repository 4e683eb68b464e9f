#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kforge/acquisition.hpp"
#include "kforge/error.hpp"
#include "kforge/gp.hpp"
#include "kforge/random.hpp"

namespace kf::acquisition {
namespace {

// h(z) = phi(z) + z Phi(z) in long double (64-bit significand): the direct formula loses about
// log10(z^2) digits to cancellation, which leaves ~15 digits over the range tested.
long double h_reference(long double z) {
  const long double phi = std::exp(-0.5L * z * z) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
  const long double Phi = 0.5L * std::erfc(-z / std::sqrt(2.0L));
  return phi + z * Phi;
}

TEST(Acquisition, ErfcxMatchesDefinitionAndAsymptotics) {
  for (const double x : {-3.0, -1.0, -0.1, 0.0, 0.3, 1.0, 2.5, 5.0, 10.0, 20.0}) {
    const long double ref =
        std::exp(static_cast<long double>(x) * x) * std::erfc(static_cast<long double>(x));
    EXPECT_NEAR(erfcx(x), static_cast<double>(ref), 1e-14 * static_cast<double>(ref)) << x;
  }
  // Both sides of the switch to the asymptotic series (x = 26), and its leading term far out.
  for (const double x : {25.9, 26.0, 26.1, 30.0, 60.0, 100.0}) {
    const long double ref =
        std::exp(static_cast<long double>(x) * x) * std::erfc(static_cast<long double>(x));
    EXPECT_NEAR(erfcx(x), static_cast<double>(ref), 1e-14 * static_cast<double>(ref)) << x;
  }
  EXPECT_NEAR(erfcx(1e6), 1.0 / (1e6 * std::sqrt(M_PI)), 1e-15);
  EXPECT_EQ(erfcx(-30.0), std::numeric_limits<double>::infinity());
}

TEST(Acquisition, LogHMatchesLongDoubleReference) {
  for (double z = -100.0; z <= 5.0; z += 0.37) {
    const double ref = static_cast<double>(std::log(h_reference(z)));
    EXPECT_NEAR(log_h(z), ref, 1e-11 * std::max(1.0, std::abs(ref))) << z;
  }
}

TEST(Acquisition, LogEiAgreesWithEiAndStaysFinite) {
  // Where EI is representable, log(EI) == log-EI.
  for (double z = -30.0; z <= 6.0; z += 0.5) {
    const double sd = 0.7, mean = 1.0, best = mean + z * sd;
    const double ei = expected_improvement(mean, sd, best);
    ASSERT_GT(ei, 0.0) << z;
    EXPECT_NEAR(std::log(ei), log_expected_improvement(mean, sd, best),
                1e-10 * std::max(1.0, std::abs(std::log(ei))))
        << z;
  }
  // Far in the tail the double formula gives 0; log-EI stays finite: against the long double
  // formula at z = -40 (EI ~ 1e-351), and against the asymptote log phi(z) - 2 log|z| beyond.
  EXPECT_EQ(expected_improvement(0.0, 1.0, -40.0), 0.0);
  const double v40 = log_expected_improvement(0.0, 1.0, -40.0);
  ASSERT_TRUE(std::isfinite(v40));
  EXPECT_NEAR(v40, static_cast<double>(std::log(h_reference(-40.0L))), 1e-12 * std::abs(v40));
  for (const double z : {-1e4, -1e8}) {
    const double v = log_expected_improvement(0.0, 1.0, z);
    ASSERT_TRUE(std::isfinite(v)) << z;
    const double asym = -0.5 * z * z - 0.5 * std::log(2 * M_PI) - 2 * std::log(-z) + std::log1p(-3 / (z * z));
    EXPECT_NEAR(v, asym, 1e-12 * std::abs(asym)) << z;
  }
  // Continuity at the branch points and monotonicity.
  for (const double z : {-1.0, -30.0})
    EXPECT_NEAR(log_h(z - 1e-9), log_h(z + 1e-9), 1e-7);
  double prev = -std::numeric_limits<double>::infinity();
  for (double z = -60.0; z < 5.0; z += 0.01) {
    const double v = log_h(z);
    EXPECT_GT(v, prev) << z;
    prev = v;
  }
}

TEST(Acquisition, KnownValues) {
  EXPECT_NEAR(expected_improvement(0.0, 1.0, 0.0), 1.0 / std::sqrt(2 * M_PI), 1e-15);
  // EI with xi: improvement required beyond best - xi.
  EXPECT_NEAR(expected_improvement(0.0, 1.0, 0.5, 0.5), 1.0 / std::sqrt(2 * M_PI), 1e-15);
  EXPECT_NEAR(probability_of_improvement(1.0, 1.0, 1.0), 0.5, 1e-15);
  EXPECT_NEAR(probability_of_improvement(0.0, 1.0, 1.959963984540054), 0.975, 1e-12);
  EXPECT_NEAR(probability_of_improvement(0.0, 2.0, -1.959963984540054 * 2), 0.025, 1e-12);
  EXPECT_DOUBLE_EQ(lower_confidence_bound(1.0, 2.0, 2.0), 3.0);
  EXPECT_DOUBLE_EQ(lower_confidence_bound(1.0, 2.0, 0.0), -1.0);
  // Zero standard deviation: the deterministic limits.
  EXPECT_DOUBLE_EQ(expected_improvement(1.0, 0.0, 3.0), 2.0);
  EXPECT_DOUBLE_EQ(expected_improvement(4.0, 0.0, 3.0), 0.0);
  EXPECT_DOUBLE_EQ(log_expected_improvement(1.0, 0.0, 3.0), std::log(2.0));
  EXPECT_EQ(log_expected_improvement(4.0, 0.0, 3.0), -std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(probability_of_improvement(1.0, 0.0, 3.0), 1.0);
  // EI against numerical integration of E[max(best - f, 0)].
  const double mean = 0.3, sd = 0.8, best = 0.1;
  double integral = 0;
  const double step = 1e-4;
  for (double f = mean - 12 * sd; f < best; f += step) {
    const double t = f + step / 2;
    integral +=
        (best - t) * std::exp(-0.5 * std::pow((t - mean) / sd, 2)) / (sd * std::sqrt(2 * M_PI)) * step;
  }
  EXPECT_NEAR(expected_improvement(mean, sd, best), integral, 1e-8);
}

TEST(Acquisition, ScoreVectorMatchesScalars) {
  Eigen::VectorXd mean(5), var(5), out(5);
  mean << 0.0, 1.0, -1.0, 2.0, 0.5;
  var << 1.0, 0.25, 4.0, 1e-30, 0.0;
  for (const auto k : {kind::ei, kind::log_ei, kind::pi, kind::lcb}) {
    spec s{.type = k, .xi = 0.1, .beta = 1.5};
    score(s, 0.2, mean, var, out);
    for (int i = 0; i < 5; ++i) {
      const double sd = std::sqrt(var(i));
      const double expected = k == kind::ei       ? expected_improvement(mean(i), sd, 0.2, 0.1)
                              : k == kind::log_ei ? log_expected_improvement(mean(i), sd, 0.2, 0.1)
                              : k == kind::pi     ? probability_of_improvement(mean(i), sd, 0.2, 0.1)
                                                  : lower_confidence_bound(mean(i), sd, 1.5);
      EXPECT_EQ(out(i), expected);
      EXPECT_FALSE(std::isnan(out(i)));
    }
  }
  EXPECT_THROW(score(spec{.type = kind::thompson}, 0.0, mean, var, out), error);
}

// A GP on BO-like data: half the points spread, half clustered near an optimum.
gp bo_like_gp(std::size_t n, Eigen::Index d, std::uint64_t seed) {
  rng r(seed);
  Eigen::MatrixXd X(static_cast<Eigen::Index>(n), d);
  Eigen::VectorXd y(static_cast<Eigen::Index>(n));
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    for (Eigen::Index j = 0; j < d; ++j)
      X(i, j) = i % 2 ? r.uniform() : std::clamp(0.3 + 0.08 * r.normal(), 0.0, 1.0);
    y(i) = (X.row(i).array() - 0.3).square().sum() + 0.2 * std::sin(5 * X(i, 0));
  }
  gp g(static_cast<std::size_t>(d), {.seed = seed});
  g.fit(X, y);
  return g;
}

Eigen::MatrixXd uniform_points(rng& r, Eigen::Index n, Eigen::Index d) {
  Eigen::MatrixXd X(n, d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < d; ++j)
      X(i, j) = r.uniform();
  return X;
}

TEST(Acquisition, PrunedSelectionEqualsBruteForce) {
  const gp g = bo_like_gp(300, 4, 3);
  rng r(1);
  const Eigen::MatrixXd C = uniform_points(r, 4000, 4);
  for (const auto k : {kind::ei, kind::log_ei, kind::pi, kind::lcb}) {
    for (const std::size_t top : {1u, 10u}) {
      spec pruned{.type = k, .xi = 0.01};
      spec brute = pruned;
      brute.prune = false;
      const selection a = select(g, C, pruned, top), b = select(g, C, brute, top);
      ASSERT_EQ(a.top.size(), top);
      ASSERT_EQ(b.top.size(), top);
      for (std::size_t i = 0; i < top; ++i) {
        EXPECT_EQ(a.top[i].index, b.top[i].index) << static_cast<int>(k) << " rank " << i;
        EXPECT_NEAR(a.top[i].score, b.top[i].score, 1e-9 * std::max(1.0, std::abs(b.top[i].score)));
      }
      EXPECT_EQ(b.exact_variances, 4000u);
      EXPECT_LT(a.exact_variances, 1000u);  // the bound must actually prune here
      EXPECT_GT(a.refined_bounds, 0u);
      for (std::size_t i = 1; i < top; ++i)
        EXPECT_GE(a.top[i - 1].score, a.top[i].score);
    }
  }
}

TEST(Acquisition, ArgmaxPrefersImprovementAndUncertainty) {
  gp g(1);
  Eigen::MatrixXd X(3, 1);
  X << 0.1, 0.5, 0.9;
  Eigen::VectorXd y(3);
  y << 1.0, 0.0, 1.0;
  g.fit_fixed(X, y, [] {
    gp_hyper h = gp_hyper::defaults(1);
    h.log_lengthscale(0) = std::log(0.1);
    h.log_noise_variance = std::log(1e-6);
    return h;
  }());
  Eigen::MatrixXd C(4, 1);
  C << 0.1, 0.5, 0.9, 0.3;
  // Far from the data the variance is large: LCB with a big beta picks the unexplored point.
  EXPECT_EQ(argmax(g, C, {.type = kind::lcb, .beta = 10}).index, 3u);
  // Pure exploitation (beta = 0) picks the best mean.
  EXPECT_EQ(argmax(g, C, {.type = kind::lcb, .beta = 0}).index, 1u);
  EXPECT_THROW(argmax(g, Eigen::MatrixXd(0, 1), {}), error);
  EXPECT_THROW(select(g, C, {.type = kind::thompson}, 1), error);
  EXPECT_EQ(select(g, C, {}, 10).top.size(), 4u);
}

TEST(Acquisition, ThompsonSamplingIsReproducible) {
  const gp g = bo_like_gp(60, 3, 5);
  rng c(2);
  const Eigen::MatrixXd small = uniform_points(c, 100, 3), large = uniform_points(c, 3000, 3);
  for (const auto* C : {&small, &large}) {
    rng a(42), b(42), other(43);
    const spec s{.type = kind::thompson};
    const selection sa = select(g, *C, s, 5, &a), sb = select(g, *C, s, 5, &b);
    ASSERT_EQ(sa.top.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(sa.top[i].index, sb.top[i].index);
      EXPECT_EQ(sa.top[i].score, sb.top[i].score);
    }
    // Successive draws from one generator differ.
    EXPECT_NE(argmax(g, *C, s, &other).score, argmax(g, *C, s, &other).score);
  }
}

// ---- sparse screening (spec::screening) ----------------------------------------------------------

spec screened(kind k, std::size_t keep, std::size_t min_points, gp_sparse_options o) {
  spec s{.type = k, .xi = 0.01};
  s.screen = screening::sparse;
  s.screen_keep = keep;
  s.screen_min_points = min_points;
  s.sparse = o;
  return s;
}

// With every training point inducing (the sparse GP is then the exact one), the screen keeps the
// exact best, so the screened selection is the brute-force one.
TEST(Acquisition, SparseScreeningWithAllPointsEqualsBruteForce) {
  const gp g = bo_like_gp(300, 4, 3);
  rng r(1);
  const Eigen::MatrixXd C = uniform_points(r, 4000, 4);
  for (const auto k : {kind::ei, kind::log_ei, kind::pi, kind::lcb}) {
    spec brute{.type = k, .xi = 0.01, .prune = false};
    const spec s = screened(k, 64, 100, {.inducing_points = 300, .variance_rank = 300, .seed = 2});
    const selection a = select(g, C, s, 5), b = select(g, C, brute, 5);
    EXPECT_EQ(a.screened, 64u);
    EXPECT_LE(a.exact_variances, 64u);
    ASSERT_EQ(a.top.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
      if (k == kind::pi && b.top[i].score == 1.0) continue;  // saturated PI: ties broken by index
      EXPECT_EQ(a.top[i].index, b.top[i].index) << static_cast<int>(k) << " rank " << i;
      EXPECT_NEAR(a.top[i].score, b.top[i].score, 1e-9 * std::max(1.0, std::abs(b.top[i].score)));
    }
  }
}

// Below screen_min_points training points, with no more candidates than screen_keep, or for Thompson
// sampling, sparse screening is the exact path: the same result and nothing screened.
TEST(Acquisition, SparseScreeningFallsBackToExact) {
  const gp g = bo_like_gp(300, 4, 3);
  rng r(2);
  const Eigen::MatrixXd C = uniform_points(r, 3000, 4);
  const spec exact{.type = kind::log_ei, .xi = 0.01};
  const selection e = select(g, C, exact, 3);
  for (const spec& s : {screened(kind::log_ei, 64, 301, {.inducing_points = 20}),
                        screened(kind::log_ei, 3000, 100, {.inducing_points = 20})}) {
    const selection a = select(g, C, s, 3);
    EXPECT_EQ(a.screened, 0u);
    EXPECT_EQ(a.exact_variances, e.exact_variances);
    ASSERT_EQ(a.top.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(a.top[i].index, e.top[i].index);
      EXPECT_EQ(a.top[i].score, e.top[i].score);
    }
  }
  // At the threshold it does screen.
  EXPECT_EQ(select(g, C, screened(kind::log_ei, 64, 300, {.inducing_points = 20}), 3).screened, 64u);
  rng a(9), b(9);
  spec t = screened(kind::thompson, 64, 100, {.inducing_points = 20});
  const selection ta = select(g, C, t, 2, &a);
  t.screen = screening::exact;
  const selection tb = select(g, C, t, 2, &b);
  EXPECT_EQ(ta.screened, 0u);
  EXPECT_EQ(ta.top[0].index, tb.top[0].index);
}

// Few inducing points: the result is deterministic for a seed, its score is the exact acquisition of
// the chosen candidate, and it is never better than the exact maximum. A mean offset reaches both stages.
TEST(Acquisition, SparseScreeningIsSeededAndScoresExactly) {
  const gp g = bo_like_gp(600, 5, 11);
  rng r(3);
  const Eigen::MatrixXd C = uniform_points(r, 20000, 5);
  const spec s = screened(kind::log_ei, 256, 500, {.inducing_points = 48, .variance_rank = 8, .seed = 4});
  const selection a = select(g, C, s, 4), b = select(g, C, s, 4);
  ASSERT_EQ(a.top.size(), 4u);
  EXPECT_EQ(a.screened, 256u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a.top[i].index, b.top[i].index);
    EXPECT_EQ(a.top[i].score, b.top[i].score);
  }
  const choice exact = argmax(g, C, {.type = kind::log_ei, .xi = 0.01});
  EXPECT_LE(a.top[0].score, exact.score);
  for (const auto& c : a.top) {
    const gp_prediction p = g.predict(C.row(static_cast<Eigen::Index>(c.index)));
    EXPECT_NEAR(c.score, log_expected_improvement(p.mean(0), std::sqrt(p.variance(0)), g.best_target(), 0.01),
                1e-9 * std::abs(c.score));
  }
  // An offset that makes every candidate but one hopeless: both stages must see it.
  spec o = s;
  o.mean_offset = Eigen::VectorXd::Constant(C.rows(), 100.0);
  o.mean_offset(12345) = 0.0;
  EXPECT_EQ(argmax(g, C, o).index, 12345u);
  o.mean_offset.resize(3);
  EXPECT_THROW(select(g, C, o, 1), error);
}

}  // namespace
}  // namespace kf::acquisition
