#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Dense>

#include "kforge/error.hpp"
#include "kforge/gp.hpp"
#include "kforge/random.hpp"

namespace kf {
namespace {

// An independent implementation of the kernels, straight from their definitions.
double kernel_ref(gp_kernel kind, double s2, const Eigen::VectorXd& a, const Eigen::VectorXd& b,
                  const Eigen::VectorXd& l) {
  const double q = ((a - b).array() / l.array()).square().sum(), r = std::sqrt(q);
  switch (kind) {
    case gp_kernel::rbf:
      return s2 * std::exp(-0.5 * q);
    case gp_kernel::matern32:
      return s2 * (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r);
    case gp_kernel::matern52:
      return s2 * (1 + std::sqrt(5.0) * r + 5.0 * q / 3.0) * std::exp(-std::sqrt(5.0) * r);
  }
  return 0;
}

Eigen::MatrixXd uniform_points(rng& r, Eigen::Index n, Eigen::Index d) {
  Eigen::MatrixXd X(n, d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < d; ++j)
      X(i, j) = r.uniform();
  return X;
}

Eigen::VectorXd smooth_targets(const Eigen::MatrixXd& X) {
  Eigen::VectorXd y(X.rows());
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    y(i) = std::sin(3 * X(i, 0)) + (X.row(i).array() - 0.3).square().sum() +
           0.1 * std::cos(7 * X(i, X.cols() - 1));
  return y;
}

gp_hyper make_hyper(std::vector<double> l, double s2, double noise) {
  gp_hyper h;
  h.log_lengthscale =
      Eigen::Map<Eigen::VectorXd>(l.data(), static_cast<Eigen::Index>(l.size())).array().log();
  h.log_signal_variance = std::log(s2);
  h.log_noise_variance = std::log(noise);
  return h;
}

bool all_finite(const gp_prediction& p) {
  return p.mean.allFinite() && p.variance.allFinite();
}

const gp_kernel kKernels[] = {gp_kernel::matern52, gp_kernel::matern32, gp_kernel::rbf};

TEST(Gp, ClosedFormTwoPointsRbf) {
  // 1-D, x = {0.2, 0.6}, y = {1, 3}: standardised targets are {-1, 1} (mean 2, sd 1).
  const double l = 0.3, s2 = 1.5, noise = 0.01;
  gp g(1, {.kernel = gp_kernel::rbf});
  Eigen::MatrixXd X(2, 1);
  X << 0.2, 0.6;
  Eigen::VectorXd y(2);
  y << 1, 3;
  g.fit_fixed(X, y, make_hyper({l}, s2, noise));
  EXPECT_DOUBLE_EQ(g.y_mean(), 2.0);
  EXPECT_DOUBLE_EQ(g.y_std(), 1.0);

  const auto k = [&](double a, double b) { return s2 * std::exp(-(a - b) * (a - b) / (2 * l * l)); };
  // (K + noise I)^-1 by the 2 x 2 formula.
  const double a = k(0.2, 0.2) + noise, b = k(0.2, 0.6), det = a * a - b * b;
  Eigen::Matrix2d inv;
  inv << a / det, -b / det, -b / det, a / det;
  const Eigen::Vector2d z(-1, 1);
  for (const double xs : {0.0, 0.3, 0.45, 1.0}) {
    const Eigen::Vector2d ks(k(xs, 0.2), k(xs, 0.6));
    const double mean = 2.0 + ks.dot(inv * z);
    const double var = s2 - ks.dot(inv * ks);
    Eigen::MatrixXd P(1, 1);
    P << xs;
    const gp_prediction p = g.predict(P);
    EXPECT_NEAR(p.mean(0), mean, 1e-12) << xs;
    EXPECT_NEAR(p.variance(0), var, 1e-12) << xs;
    const gp_prediction pn = g.predict(P, true, true);
    EXPECT_NEAR(pn.variance(0), var + noise, 1e-12) << xs;
    EXPECT_EQ(g.predict(P, false).variance.size(), 0);
  }
}

TEST(Gp, LogMarginalLikelihoodMatchesDenseComputation) {
  // 25 points: Eigen's factorisation; 300: the blocked factorisation and inverse.
  for (const Eigen::Index n : {25, 300}) {
    rng r(7);
    const Eigen::MatrixXd X = uniform_points(r, n, 3);
    const Eigen::VectorXd y = smooth_targets(X);
    const gp_hyper h = make_hyper({0.4, 0.7, 0.25}, 1.3, 0.02);
    for (const auto kind : kKernels) {
      gp g(3, {.kernel = kind});
      g.fit_fixed(X, y, h);
      const Eigen::VectorXd z = (y.array() - g.y_mean()) / g.y_std();
      Eigen::MatrixXd K(n, n);
      const Eigen::VectorXd l = h.log_lengthscale.array().exp();
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
          K(i, j) = kernel_ref(kind, 1.3, X.row(i), X.row(j), l) + (i == j ? 0.02 : 0.0);
      const Eigen::FullPivLU<Eigen::MatrixXd> lu(K);
      const double log_det = lu.matrixLU().diagonal().array().abs().log().sum();
      const double expected =
          -0.5 * z.dot(lu.solve(z)) - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2 * M_PI);
      EXPECT_NEAR(g.log_marginal_likelihood(), expected, 1e-9 * std::abs(expected))
          << to_string(kind) << " n=" << n;
      EXPECT_EQ(g.jitter(), 0.0);
    }
  }
}

TEST(Gp, GradientMatchesCentralDifferences) {
  for (const Eigen::Index n : {20, 300}) {
    rng r(11);
    const Eigen::MatrixXd X = uniform_points(r, n, 3);
    const Eigen::VectorXd y = smooth_targets(X);
    const gp_hyper h = make_hyper({0.3, 0.8, 0.5}, 0.9, 0.05);
    for (const auto kind : kKernels) {
      gp g(3, {.kernel = kind});
      g.fit_fixed(X, y, h);
      Eigen::VectorXd grad;
      g.log_marginal_likelihood(h, &grad);
      const Eigen::VectorXd theta = h.pack();
      ASSERT_EQ(grad.size(), theta.size());
      for (Eigen::Index j = 0; j < theta.size(); ++j) {
        const double step = 1e-5;
        Eigen::VectorXd tp = theta, tm = theta;
        tp(j) += step;
        tm(j) -= step;
        const double fd = (g.log_marginal_likelihood(gp_hyper::unpack(tp)) -
                           g.log_marginal_likelihood(gp_hyper::unpack(tm))) /
                          (2 * step);
        EXPECT_NEAR(grad(j), fd, 1e-6 * std::max(1.0, std::abs(fd)))
            << to_string(kind) << " n=" << n << " theta " << j;
      }
    }
  }
}

TEST(Gp, FitRecoversLengthScale) {
  // A draw from a Matern 5/2 GP with length scale 0.2 in 1-D, small noise.
  rng r(3);
  const Eigen::Index n = 120;
  const Eigen::MatrixXd X = uniform_points(r, n, 1);
  const double l = 0.2, noise = 1e-4;
  Eigen::MatrixXd K(n, n);
  const Eigen::VectorXd lv = Eigen::VectorXd::Constant(1, l);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j)
      K(i, j) = kernel_ref(gp_kernel::matern52, 1.0, X.row(i), X.row(j), lv) + (i == j ? noise : 0.0);
  Eigen::VectorXd e(n);
  for (Eigen::Index i = 0; i < n; ++i)
    e(i) = r.normal();
  const Eigen::VectorXd y = Eigen::LLT<Eigen::MatrixXd>(K).matrixL() * e;
  gp g(1, {.seed = 5});
  g.fit(X, y);
  EXPECT_TRUE(g.last_fit().optimised);
  const double fitted = std::exp(g.hyper().log_lengthscale(0));
  EXPECT_GT(fitted, l / 2) << fitted;
  EXPECT_LT(fitted, l * 2) << fitted;
  // The fit may not be worse than the truth (in the model's standardised units).
  gp_hyper truth = make_hyper({l}, 1.0 / (g.y_std() * g.y_std()), noise / (g.y_std() * g.y_std()));
  EXPECT_GE(g.log_marginal_likelihood(), g.log_marginal_likelihood(truth) - 1e-6);
}

TEST(Gp, FitIsReproducibleAndThreadIndependent) {
  rng r(5);
  const Eigen::MatrixXd X = uniform_points(r, 60, 4);
  const Eigen::VectorXd y = smooth_targets(X);
  gp a(4, {.seed = 9}), b(4, {.seed = 9}), c(4, {.seed = 9, .parallel = false});
  a.fit(X, y);
  b.fit(X, y);
  c.fit(X, y);
  EXPECT_EQ(a.hyper().pack(), b.hyper().pack());
  EXPECT_EQ(a.hyper().pack(), c.hyper().pack());
  const Eigen::MatrixXd P = uniform_points(r, 700, 4);
  const gp_prediction pa = a.predict(P), pc = c.predict(P);
  EXPECT_EQ(pa.mean, pc.mean);
  EXPECT_EQ(pa.variance, pc.variance);
}

TEST(Gp, ParallelFlagDoesNotChangeLargeFactorisations) {
  // From 256 points on the factorisation, inverse and kernel build are blocked (and parallel).
  rng r(6);
  const Eigen::MatrixXd X = uniform_points(r, 300, 3);
  const Eigen::VectorXd y = smooth_targets(X);
  gp a(3, {.max_fit_points = 280}), b(3, {.max_fit_points = 280, .parallel = false});
  a.fit(X, y);
  b.fit(X, y);
  EXPECT_EQ(a.hyper().pack(), b.hyper().pack());
  const Eigen::MatrixXd P = uniform_points(r, 300, 3);
  const gp_prediction pa = a.predict(P), pb = b.predict(P);
  EXPECT_EQ(pa.mean, pb.mean);
  EXPECT_EQ(pa.variance, pb.variance);
  // And the blocked factorisation agrees with a dense reference.
  Eigen::VectorXd grad_a, grad_b;
  EXPECT_EQ(a.log_marginal_likelihood(a.hyper(), &grad_a), b.log_marginal_likelihood(a.hyper(), &grad_b));
  EXPECT_EQ(grad_a, grad_b);
}

TEST(Gp, SubsetFitUsesAtMostMaxFitPoints) {
  rng r(8);
  const Eigen::MatrixXd X = uniform_points(r, 300, 2);
  const Eigen::VectorXd y = smooth_targets(X);
  gp g(2, {.max_fit_points = 100});
  g.fit(X, y);
  EXPECT_EQ(g.last_fit().points_used, 100u);
  EXPECT_EQ(g.size(), 300u);
  // The training targets are reproduced closely with the full factorisation.
  const gp_prediction p = g.predict(X);
  EXPECT_LT((p.mean - y).cwiseAbs().maxCoeff(), 0.05);
}

TEST(Gp, AppendEqualsRefactorisation) {
  rng r(13);
  const Eigen::MatrixXd X = uniform_points(r, 40, 3);
  const Eigen::VectorXd y = smooth_targets(X);
  for (const auto kind : kKernels) {
    gp g(3, {.kernel = kind});
    g.fit_fixed(X.topRows(30), y.head(30), make_hyper({0.3, 0.4, 0.5}, 1.0, 1e-3));
    for (Eigen::Index i = 30; i < 40; ++i)
      g.append(X.row(i).transpose(), y(i));
    EXPECT_EQ(g.size(), 40u);
    gp full = g;
    full.refactorise();
    const Eigen::MatrixXd P = uniform_points(r, 50, 3);
    const gp_prediction pa = g.predict(P), pf = full.predict(P);
    EXPECT_LT((pa.mean - pf.mean).cwiseAbs().maxCoeff(), 1e-9) << to_string(kind);
    EXPECT_LT((pa.variance - pf.variance).cwiseAbs().maxCoeff(), 1e-9) << to_string(kind);
    EXPECT_NEAR(g.log_marginal_likelihood(), full.log_marginal_likelihood(), 1e-8);
  }
}

TEST(Gp, KrigingBelieverKeepsMeanAndShrinksVariance) {
  rng r(17);
  const Eigen::MatrixXd X = uniform_points(r, 30, 2);
  const Eigen::VectorXd y = smooth_targets(X);
  gp g(2);
  g.fit(X, y);
  const Eigen::MatrixXd pending = uniform_points(r, 4, 2);
  const gp kb = g.condition_on_pending(pending);
  EXPECT_EQ(kb.size(), 34u);
  EXPECT_EQ(g.size(), 30u);
  const gp_prediction before = g.predict(pending), after = kb.predict(pending);
  for (Eigen::Index i = 0; i < 4; ++i) {
    EXPECT_NEAR(after.mean(i), before.mean(i), 1e-8);
    EXPECT_LT(after.variance(i), 0.5 * before.variance(i));
  }
  const Eigen::MatrixXd elsewhere = uniform_points(r, 20, 2);
  EXPECT_LT((kb.predict(elsewhere).mean - g.predict(elsewhere).mean).cwiseAbs().maxCoeff(), 1e-8);
  EXPECT_TRUE(
      (kb.predict(elsewhere).variance.array() <= g.predict(elsewhere).variance.array() + 1e-12).all());

  // Constant liar: the mean at the pending points moves to the lie.
  const double lie = y.maxCoeff();
  const gp cl = g.condition_on_pending(pending, lie);
  const gp_prediction pcl = cl.predict(pending);
  for (Eigen::Index i = 0; i < 4; ++i) {
    EXPECT_LT(std::abs(pcl.mean(i) - lie), std::abs(before.mean(i) - lie) + 1e-12);
    EXPECT_LT(pcl.variance(i), before.variance(i));
  }
}

TEST(Gp, VarianceBoundIsAnUpperBound) {
  rng r(19);
  const Eigen::MatrixXd X = uniform_points(r, 200, 3);
  const Eigen::VectorXd y = smooth_targets(X);
  for (const auto kind : kKernels) {
    gp g(3, {.kernel = kind});
    g.fit(X, y);
    const Eigen::MatrixXd P = uniform_points(r, 500, 3);
    const gp_prediction p = g.predict(P);
    for (const std::size_t k : {1u, 4u, 16u}) {
      Eigen::VectorXd mean(500), bound(500);
      g.predict_mean_and_variance_bound(P, mean, bound, k);
      EXPECT_LT((mean - p.mean).cwiseAbs().maxCoeff(), 1e-10);
      EXPECT_TRUE((bound.array() >= p.variance.array()).all()) << to_string(kind) << " k=" << k;
    }
  }
}

// The AVX2 kernels (gp_options::simd, used where the CPU has AVX2 and FMA) and the baseline path
// agree to rounding: predictions, variance bounds, and therefore the acquisition's choices.
TEST(Gp, SimdAndBaselinePredictionsAgree) {
  rng r(23);
  for (const auto kind : kKernels) {
    for (const double l : {0.02, 0.3, 2.0}) {
      const Eigen::Index n = 300, d = 5;
      const Eigen::MatrixXd X = uniform_points(r, n, d);
      const Eigen::VectorXd y = smooth_targets(X).array() + 100.0;
      gp fast(d, {.kernel = kind}), base(d, {.kernel = kind, .simd = false});
      const gp_hyper h = make_hyper(std::vector<double>(d, l), 1.3, 1e-4);
      fast.fit_fixed(X, y, h);
      base.fit_fixed(X, y, h);
      Eigen::MatrixXd P = uniform_points(r, 1001, d);  // odd: the padded tail too
      P.topRows(n) = X;
      const gp_prediction a = fast.predict(P), b = base.predict(P);
      const double scale = 1.0 + y.cwiseAbs().maxCoeff();
      EXPECT_LT((a.mean - b.mean).cwiseAbs().maxCoeff(), 1e-12 * scale) << to_string(kind) << " l=" << l;
      EXPECT_LT((a.variance - b.variance).cwiseAbs().maxCoeff(), 1e-11 * base.y_std() * base.y_std())
          << to_string(kind) << " l=" << l;
      Eigen::VectorXd ma(P.rows()), va(P.rows()), mb(P.rows()), vb(P.rows());
      for (const std::size_t k : {4, 16}) {  // 16: the two-pass top-k needs n >= 16 k
        fast.predict_mean_and_variance_bound(P, ma, va, k);
        base.predict_mean_and_variance_bound(P, mb, vb, k);
        EXPECT_LT((va - vb).cwiseAbs().maxCoeff(), 1e-11 * base.y_std() * base.y_std()) << "k=" << k;
        EXPECT_TRUE((va.array() >= a.variance.array()).all()) << "k=" << k;
      }
    }
  }
}

// More than 64 dimensions: the AVX2 distance kernel is skipped (its per-row buffer holds 64), and the
// result is still the baseline's.
TEST(Gp, SimdPathBeyondSixtyFourDimensions) {
  rng r(29);
  const Eigen::Index n = 40, d = 70;
  const Eigen::MatrixXd X = uniform_points(r, n, d);
  const Eigen::VectorXd y = X.rowwise().sum();
  gp fast(d), base(d, {.simd = false});
  const gp_hyper h = make_hyper(std::vector<double>(d, 3.0), 1.0, 1e-4);
  fast.fit_fixed(X, y, h);
  base.fit_fixed(X, y, h);
  const Eigen::MatrixXd P = uniform_points(r, 33, d);
  const gp_prediction a = fast.predict(P), b = base.predict(P);
  EXPECT_LT((a.mean - b.mean).cwiseAbs().maxCoeff(), 1e-10 * (1.0 + y.cwiseAbs().maxCoeff()));
  EXPECT_LT((a.variance - b.variance).cwiseAbs().maxCoeff(), 1e-10 * base.y_std() * base.y_std());
}

TEST(Gp, PriorWithoutData) {
  gp g(2);
  Eigen::MatrixXd P(3, 2);
  P << 0, 0, 0.5, 0.5, 1, 1;
  const gp_prediction p = g.predict(P);
  EXPECT_TRUE(p.mean.isZero());
  EXPECT_TRUE((p.variance.array() == 1.0).all());
  g.fit(Eigen::MatrixXd(0, 2), Eigen::VectorXd(0));
  EXPECT_EQ(g.size(), 0u);
  EXPECT_TRUE(all_finite(g.predict(P)));
  EXPECT_EQ(g.best_target(), std::numeric_limits<double>::infinity());
  rng r(1);
  EXPECT_TRUE(g.sample_posterior(P, r).allFinite());
}

TEST(Gp, DegenerateDataNeverThrowsOrReturnsNaN) {
  rng r(23);
  const Eigen::MatrixXd P = uniform_points(r, 50, 2);
  // One point.
  {
    gp g(2);
    Eigen::MatrixXd X(1, 2);
    X << 0.3, 0.4;
    g.fit(X, Eigen::VectorXd::Constant(1, 5.0));
    const gp_prediction p = g.predict(P);
    EXPECT_TRUE(all_finite(p));
    EXPECT_NEAR(g.predict(X).mean(0), 5.0, 1e-2);
  }
  // Constant targets.
  {
    gp g(2);
    const Eigen::MatrixXd X = uniform_points(r, 10, 2);
    g.fit(X, Eigen::VectorXd::Constant(10, -2.0));
    EXPECT_FALSE(g.last_fit().optimised);
    const gp_prediction p = g.predict(P);
    EXPECT_TRUE(all_finite(p));
    EXPECT_LT((p.mean.array() + 2.0).abs().maxCoeff(), 1e-9);
  }
  // Duplicate inputs with different targets.
  {
    gp g(2);
    Eigen::MatrixXd X(12, 2);
    Eigen::VectorXd y(12);
    for (int i = 0; i < 12; ++i) {
      X.row(i) << 0.1 * (i % 3), 0.5;
      y(i) = (i % 3) + 0.01 * i;
    }
    g.fit(X, y);
    EXPECT_TRUE(all_finite(g.predict(P)));
    EXPECT_TRUE((g.predict(P).variance.array() > 0).all());
  }
  // Singular in double precision: points 1e-13 apart, noise 1e-20, long length scale.
  {
    gp g(2, {.bounds = {.noise_variance_min = 1e-20}});
    Eigen::MatrixXd X(6, 2);
    Eigen::VectorXd y(6);
    for (int i = 0; i < 6; ++i) {
      X.row(i) << 0.5 + 1e-13 * i, 0.5;
      y(i) = i;
    }
    g.fit_fixed(X, y, make_hyper({50, 50}, 1.0, 1e-20));
    EXPECT_FALSE(g.constant_model());
    EXPECT_GT(g.jitter(), 0.0);
    EXPECT_TRUE(all_finite(g.predict(P)));
    g.append(X.row(0).transpose(), 2.5);
    EXPECT_TRUE(all_finite(g.predict(P)));
    g.fit(X, y);
    EXPECT_TRUE(all_finite(g.predict(P)));
  }
  // Many duplicates appended one by one.
  {
    gp g(2);
    g.fit(uniform_points(r, 5, 2), Eigen::VectorXd::LinSpaced(5, 0, 1));
    for (int i = 0; i < 30; ++i)
      g.append(Eigen::Vector2d(0.25, 0.75), 0.5 + 0.001 * i);
    EXPECT_TRUE(all_finite(g.predict(P)));
  }
}

TEST(Gp, MisuseThrows) {
  gp g(2);
  EXPECT_THROW(g.fit(Eigen::MatrixXd::Zero(3, 3), Eigen::VectorXd::Zero(3)), error);
  EXPECT_THROW(g.fit(Eigen::MatrixXd::Zero(3, 2), Eigen::VectorXd::Zero(2)), error);
  Eigen::VectorXd y = Eigen::VectorXd::Zero(3);
  y(1) = std::nan("");
  EXPECT_THROW(g.fit(Eigen::MatrixXd::Zero(3, 2), y), error);
  EXPECT_THROW(g.predict(Eigen::MatrixXd::Zero(3, 1)), error);
  EXPECT_THROW(g.append(Eigen::VectorXd::Zero(3), 1.0), error);
  EXPECT_THROW(gp(2, {.bounds = {.lengthscale_min = 2, .lengthscale_max = 1}}), error);
}

TEST(Gp, PosteriorSamplesAreReproducibleAndSensible) {
  rng r(29);
  const Eigen::MatrixXd X = uniform_points(r, 40, 2);
  const Eigen::VectorXd y = smooth_targets(X);
  gp g(2);
  g.fit(X, y);
  const Eigen::MatrixXd P = uniform_points(r, 30, 2);
  const gp_prediction p = g.predict(P);
  for (const auto method :
       {gp_sample_method::exact, gp_sample_method::pathwise, gp_sample_method::marginal}) {
    rng a(4), b(4), c(5);
    const Eigen::VectorXd sa = g.sample_posterior(P, a, {.method = method});
    EXPECT_EQ(sa, g.sample_posterior(P, b, {.method = method}));
    EXPECT_NE(sa, g.sample_posterior(P, c, {.method = method}));
    // Mean of many draws is near the posterior mean.
    rng s(6);
    Eigen::VectorXd acc = Eigen::VectorXd::Zero(30);
    const int draws = 200;
    for (int i = 0; i < draws; ++i)
      acc += g.sample_posterior(P, s, {.method = method});
    acc /= draws;
    const double tol = 5 * std::sqrt(p.variance.maxCoeff() / draws) + 0.02;
    EXPECT_LT((acc - p.mean).cwiseAbs().maxCoeff(), tol) << static_cast<int>(method);
  }
}

TEST(Gp, PosteriorCovarianceDiagonalIsVariance) {
  rng r(31);
  const Eigen::MatrixXd X = uniform_points(r, 25, 3);
  gp g(3);
  g.fit(X, smooth_targets(X));
  const Eigen::MatrixXd P = uniform_points(r, 10, 3);
  const Eigen::MatrixXd cov = g.posterior_covariance(P);
  EXPECT_LT((cov.diagonal() - g.predict(P).variance).cwiseAbs().maxCoeff(), 1e-10);
  EXPECT_LT((cov - cov.transpose()).cwiseAbs().maxCoeff(), 1e-14);
}

// ---- sparse approximation (gp::sparse_approximation) ------------------------------------------------

// With every training point inducing and the full variance rank, the SoR mean and the DTC variance are
// the exact posterior (the only difference: the 1e-8 s2 jitter on K_ZZ).
TEST(Gp, SparseWithAllPointsIsExact) {
  rng r(41);
  for (const auto kind : kKernels) {
    const Eigen::Index n = 150, d = 3;
    const Eigen::MatrixXd X = uniform_points(r, n, d);
    gp g(d, {.kernel = kind});
    g.fit_fixed(X, smooth_targets(X), make_hyper({0.3, 0.4, 0.5}, 1.2, 1e-2));
    for (const bool simd : {true, false}) {
      gp_sparse_options o{.inducing_points = 1000, .variance_rank = 1000, .seed = 1};
      gp h(d, {.kernel = kind, .simd = simd});
      h.fit_fixed(X, smooth_targets(X), g.hyper());
      const gp_sparse s = h.sparse_approximation(o);
      ASSERT_TRUE(s.valid());
      EXPECT_EQ(s.inducing().size(), static_cast<std::size_t>(n));
      EXPECT_EQ(s.variance_rank(), static_cast<std::size_t>(n));
      const Eigen::MatrixXd P = uniform_points(r, 301, d);
      const gp_prediction exact = g.predict(P);
      Eigen::VectorXd mean(P.rows()), var(P.rows());
      s.predict(P, mean, var);
      EXPECT_LT((mean - exact.mean).cwiseAbs().maxCoeff(), 1e-5 * g.y_std()) << to_string(kind);
      EXPECT_LT(((var - exact.variance).array() / exact.variance.array()).abs().maxCoeff(), 1e-3)
          << to_string(kind);
    }
  }
}

// Fewer inducing points: deterministic for a seed, distinct training rows, a mean that does not depend
// on the variance's rank, and a variance that only grows as the rank drops (dropped directions only
// remove variance reduction), bounded by the prior.
TEST(Gp, SparseApproximationIsSeededAndRankOnlyRaisesVariance) {
  rng r(43);
  const Eigen::Index n = 400, d = 4;
  const Eigen::MatrixXd X = uniform_points(r, n, d);
  gp g(d);
  g.fit_fixed(X, smooth_targets(X), make_hyper({0.5, 0.5, 0.7, 0.9}, 1.0, 1e-3));
  const gp_sparse a = g.sparse_approximation({.inducing_points = 60, .variance_rank = 8, .seed = 7});
  const gp_sparse b = g.sparse_approximation({.inducing_points = 60, .variance_rank = 8, .seed = 7});
  const gp_sparse c = g.sparse_approximation({.inducing_points = 60, .variance_rank = 8, .seed = 8});
  EXPECT_EQ(a.inducing(), b.inducing());
  EXPECT_NE(a.inducing(), c.inducing());
  std::vector<std::size_t> sorted = a.inducing();
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  ASSERT_EQ(sorted.size(), 60u);
  EXPECT_LT(sorted.back(), static_cast<std::size_t>(n));

  const Eigen::MatrixXd P = uniform_points(r, 500, d);
  Eigen::VectorXd ma(P.rows()), va(P.rows()), mb(P.rows()), vb(P.rows());
  a.predict(P, ma, va);
  b.predict(P, mb, vb);
  EXPECT_EQ(ma, mb);
  EXPECT_EQ(va, vb);
  const double s2 = std::exp(g.hyper().log_signal_variance) * g.y_std() * g.y_std();
  Eigen::VectorXd previous;
  for (const std::size_t rank : {60u, 16u, 8u, 2u, 0u}) {
    const gp_sparse s = g.sparse_approximation({.inducing_points = 60, .variance_rank = rank, .seed = 7});
    EXPECT_EQ(s.variance_rank(), rank);
    Eigen::VectorXd m(P.rows()), v(P.rows());
    s.predict(P, m, v);
    EXPECT_LT((m - ma).cwiseAbs().maxCoeff(), 1e-12 * (1.0 + ma.cwiseAbs().maxCoeff())) << rank;
    EXPECT_TRUE((v.array() <= s2 * (1 + 1e-12)).all()) << rank;
    if (previous.size()) {
      EXPECT_TRUE((v.array() >= previous.array() - 1e-9 * s2).all()) << rank;
    }
    previous = v;
  }
  EXPECT_LT((previous.array() - s2).abs().maxCoeff(), 1e-12 * s2);  // rank 0: the prior
  // Not exact with fewer inducing points, but it converges: the RMS error of the mean shrinks as m grows
  // (measured 0.31, 0.11, 0.025 y_std at m = 20, 60, 200).
  const gp_prediction exact = g.predict(P);
  double last = std::numeric_limits<double>::infinity();
  for (const std::size_t m : {20u, 60u, 200u}) {
    Eigen::VectorXd mm(P.rows()), vm(P.rows());
    g.sparse_approximation({.inducing_points = m, .seed = 7}).predict(P, mm, vm);
    const double rms = std::sqrt((mm - exact.mean).squaredNorm() / static_cast<double>(P.rows()));
    EXPECT_LT(rms, 0.6 * last) << m;
    last = rms;
  }
  EXPECT_LT(last, 0.05 * g.y_std());
}

TEST(Gp, SparseApproximationOfDegenerateModels) {
  gp empty(2);
  const gp_sparse e = empty.sparse_approximation();
  EXPECT_TRUE(e.valid());
  EXPECT_TRUE(e.inducing().empty());
  Eigen::MatrixXd P(3, 2);
  P << 0.1, 0.2, 0.5, 0.5, 0.9, 0.0;
  Eigen::VectorXd m(3), v(3);
  e.predict(P, m, v);
  const gp_prediction prior = empty.predict(P);
  EXPECT_EQ(m, prior.mean);
  EXPECT_EQ(v, prior.variance);
  // Duplicated inputs: k-means++ runs out of distinct rows and takes duplicates; the jitter copes.
  Eigen::MatrixXd X(40, 2);
  Eigen::VectorXd y(40);
  for (Eigen::Index i = 0; i < 40; ++i) {
    X.row(i) << (i % 4) * 0.25, (i % 4) * 0.1;
    y(i) = static_cast<double>(i % 4);
  }
  gp g(2);
  g.fit_fixed(X, y, make_hyper({0.3, 0.3}, 1.0, 1e-4));
  const gp_sparse s = g.sparse_approximation({.inducing_points = 10, .seed = 3});
  EXPECT_TRUE(s.valid());
  EXPECT_EQ(s.inducing().size(), 10u);
  s.predict(P, m, v);
  EXPECT_TRUE(m.allFinite() && v.allFinite());
  EXPECT_TRUE((v.array() > 0).all());
  EXPECT_THROW(g.sparse_approximation({.inducing_points = 0}), error);
  EXPECT_THROW(s.predict(Eigen::MatrixXd(3, 3), m, v), error);
  Eigen::VectorXd short_out(2);
  EXPECT_THROW(s.predict(P, short_out, v), error);
}

}  // namespace
}  // namespace kf
