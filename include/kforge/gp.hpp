// kf::gp: Gaussian-process regression, the surrogate model of the Bayesian-optimisation strategies.
//
// Model: y = m + sd * (f(x) + e), f ~ GP(0, k), e ~ N(0, noise), with k an ARD stationary kernel
// (Matern 5/2, Matern 3/2 or squared exponential) of signal variance s2 and one length scale per
// input dimension. m and sd are the mean and standard deviation of the targets at the last fit (the
// GP standardises targets; predictions come back in the caller's units). Inputs are points of
// [0,1]^d (search_space::encode); targets are what the caller minimises (kforge passes log(time)).
//
// Contracts:
// * Misuse (a point of the wrong dimension, a NaN or infinite input or target, an inverted bound)
//   throws kf::error. Numerical trouble never throws: a covariance matrix that is not numerically
//   positive definite is retried with growing diagonal jitter (1e-10 .. 1e-2 of its mean diagonal),
//   then with the last hyperparameters that factorised, and finally the GP becomes a constant model
//   (mean = mean of y, variance = sd^2 * s2). Predictions are always finite and variances >= a tiny
//   positive floor.
// * fit() re-estimates the standardisation and the hyperparameters; fit_fixed() only the
//   standardisation; append() and condition_on_pending() keep both (so a GP that was appended to is
//   not the GP that fit() on the same data would give: call fit() to re-standardise).
// * Every random choice (restart points, the fitting subset) comes from a kf::rng seeded by
//   gp_options::seed and advanced by each fit: the same calls on the same data give the same model.
// * A const gp may be used from several threads at once (predictions only read it). Predictions and
//   the restarts of fit() run in parallel on TBB's arena unless gp_options::parallel is false; the
//   results do not depend on the number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "kforge/random.hpp"

namespace kf {

enum class gp_kernel { matern52, matern32, rbf };
std::string_view to_string(gp_kernel k) noexcept;

/// Hyperparameters, in natural-log space, of the standardised model.
struct gp_hyper {
  Eigen::VectorXd log_lengthscale{};  ///< one per input dimension
  double log_signal_variance = 0.0;
  double log_noise_variance = -6.907755278982137;  ///< log(1e-3)

  /// The default starting point of dimension d: length scales 0.5, signal variance 1, noise 1e-3.
  static gp_hyper defaults(std::size_t d);
  /// theta = [log l_1 .. log l_d, log s2, log noise]: the order of log_marginal_likelihood's gradient.
  Eigen::VectorXd pack() const;
  static gp_hyper unpack(const Eigen::VectorXd& theta);
};

/// Box bounds for the fit, in natural (not log) units; inputs in [0,1], standardised targets.
struct gp_bounds {
  double lengthscale_min = 1e-2, lengthscale_max = 1e2;
  double signal_variance_min = 1e-2, signal_variance_max = 1e2;
  double noise_variance_min = 1e-6, noise_variance_max = 1.0;
};

struct gp_options {
  gp_kernel kernel = gp_kernel::matern52;
  gp_bounds bounds{};
  /// L-BFGS-B runs per fit: the first from the current hyperparameters (a warm start), the others
  /// from seeded random points (log-uniform: length scales in [0.05, 2], signal variance in
  /// [0.3, 3], noise in [1e-5, 1e-1], each clipped to the bounds). The best likelihood wins.
  int restarts = 3;
  /// L-BFGS-B iterations per run (each costs about one factorisation of the fitting subset).
  int max_iterations = 30;
  /// The hyperparameters are estimated on a seeded random subset of at most this many points (the
  /// full data is then factorised once with them): the O(m^3) per iteration would otherwise dominate.
  /// 0 = all points.
  std::size_t max_fit_points = 256;
  /// With fewer points, or with constant targets, fit() keeps the current hyperparameters.
  std::size_t min_points_to_optimise = 3;
  std::uint64_t seed = 0;
  bool parallel = true;
  /// Predictions compute kernel values (and the variance bound's nearest points) with AVX2 + FMA
  /// where the CPU has them (checked at run time; KFORGE_GP_NO_SIMD=1 in the environment turns this
  /// off for the process). The two paths differ by rounding only (relative 1e-13, tested); a machine
  /// without AVX2 takes the baseline path.
  bool simd = true;
};

/// What the last fit did (for logging and benchmarks).
struct gp_fit_report {
  bool optimised = false;              ///< false: hyperparameters kept (too few points, constant y)
  std::size_t points_used = 0;         ///< size of the fitting subset
  int evaluations = 0;                 ///< likelihood evaluations, all runs
  int failed_runs = 0;                 ///< runs that ended by an exception of the optimiser (best point kept)
  double log_marginal_likelihood = 0;  ///< of the fitting subset at the chosen hyperparameters
};

enum class gp_sample_method {
  automatic,  ///< exact up to exact_max points, pathwise above
  exact,      ///< joint Gaussian draw: Cholesky of the m x m posterior covariance, O(m^2 n + m^3)
  pathwise,   ///< Matheron's rule (Wilson et al. 2020): a random-Fourier-feature draw of the prior,
              ///< corrected by the exact GP update; joint, approximate only in the prior (O(m F d + m n))
  marginal,   ///< independent draws from each point's marginal: not joint, cheapest (a predict())
};

struct gp_sample_options {
  gp_sample_method method = gp_sample_method::automatic;
  std::size_t exact_max = 512;
  std::size_t features = 512;  ///< random Fourier features of the pathwise prior draw
};

/// How gp::sparse_approximation builds its model (see gp_sparse).
struct gp_sparse_options {
  /// Inducing points m, chosen among the training inputs by k-means++ seeding (Arthur and Vassilvitskii
  /// 2007: the first uniformly, each next one with probability proportional to its squared distance to
  /// the nearest chosen, distances in inputs divided by the length scales). All training points when
  /// n <= m. At least 1.
  std::size_t inducing_points = 128;
  /// Rank r of the variance: the DTC variance reduction k' M k (M an m x m PSD matrix) is projected on
  /// the r directions that keep the most of it, summed over the training inputs (a PCA of M^(1/2) k
  /// there). Dropping directions only raises the variance. 0: the prior variance everywhere; >= m: the
  /// full DTC variance (O(m^2) per point instead of O(m r)).
  std::size_t variance_rank = 16;
  /// Seeds the choice of the inducing points (the only random choice).
  std::uint64_t seed = 0;
};

class gp_sparse;

/// Posterior at a batch of points: mean and variance in the caller's units.
struct gp_prediction {
  Eigen::VectorXd mean{};
  Eigen::VectorXd variance{};  ///< empty when only the mean was asked for
};

class gp {
 public:
  /// A GP on [0,1]^dimension, before any data: the prior (mean 0, variance s2).
  explicit gp(std::size_t dimension, gp_options options = {});

  /// Rows of X are points (n x d); y has n entries. Re-standardises y and fits the hyperparameters by
  /// maximum marginal likelihood (see gp_options), then factorises. Throws kf::error on misuse.
  void fit(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y);
  /// As fit() with the given hyperparameters (no optimisation).
  void fit_fixed(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y,
                 const gp_hyper& hyper);
  /// Adds one observation in O(n^2) by extending the Cholesky factor: same hyperparameters, same
  /// standardisation (fixed at the last fit), same jitter. A point that makes the factor singular
  /// triggers a full refactorisation (with the jitter retries).
  void append(const Eigen::Ref<const Eigen::VectorXd>& x, double y);
  /// Rebuilds the factor from scratch with the current data, hyperparameters and standardisation
  /// (O(n^3)); after many append() calls it drops their accumulated rounding.
  void refactorise();

  /// A copy conditioned on `pending` (rows are points) with fantasy targets equal to the current
  /// posterior mean at each of them (kriging believer): the mean is unchanged everywhere, the variance
  /// shrinks at and near the pending points. O(p n^2 + n^2).
  gp condition_on_pending(const Eigen::Ref<const Eigen::MatrixXd>& pending) const;
  /// The same with every fantasy target equal to `fantasy_y` (constant liar; e.g. the best or worst
  /// observed y, in the caller's units).
  gp condition_on_pending(const Eigen::Ref<const Eigen::MatrixXd>& pending, double fantasy_y) const;

  /// Posterior of the latent f (plus the noise variance when include_noise) at the rows of Xs.
  gp_prediction predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, bool with_variance = true,
                        bool include_noise = false) const;
  /// The same into caller-owned vectors of Xs.rows() entries. Scratch space (about 128 x n doubles)
  /// is thread-local and kept between calls, so repeated predictions do not allocate.
  void predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean,
               Eigen::Ref<Eigen::VectorXd> variance, bool include_noise = false) const;
  void predict_mean(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean) const;
  /// The exact posterior mean and an upper bound of the latent variance: the variance given only the
  /// `neighbours` training points most correlated with each point (conditioning on fewer observations
  /// never lowers a GP's variance). Costs about as much as predict_mean(); the acquisition argmax
  /// uses it to skip the O(n^2)-per-point exact variance for points that cannot win.
  void predict_mean_and_variance_bound(const Eigen::Ref<const Eigen::MatrixXd>& Xs,
                                       Eigen::Ref<Eigen::VectorXd> mean,
                                       Eigen::Ref<Eigen::VectorXd> variance_bound,
                                       std::size_t neighbours = 4) const;

  /// A sparse approximation of this GP's posterior on inducing points chosen from its training inputs
  /// (gp_sparse): O(m) kernel values per predicted point instead of O(n). Costs O(m^2 n + m^3) to build.
  /// The same GP, options and seed give the same approximation.
  gp_sparse sparse_approximation(const gp_sparse_options& options = {}) const;

  /// Joint posterior covariance of the latent f at the rows of Xs (m x m, caller's units).
  Eigen::MatrixXd posterior_covariance(const Eigen::Ref<const Eigen::MatrixXd>& Xs) const;
  /// One draw of the latent f at the rows of Xs (caller's units); the same rng state gives the same
  /// draw. A covariance that does not factorise even with jitter degrades to marginal draws.
  Eigen::VectorXd sample_posterior(const Eigen::Ref<const Eigen::MatrixXd>& Xs, rng& r,
                                   const gp_sample_options& options = {}) const;

  /// Log marginal likelihood of the standardised targets under `hyper` (all current points), and its
  /// gradient with respect to hyper.pack() when `gradient` is not null. Uses the jitter schedule when
  /// the matrix does not factorise; returns -infinity when nothing factorises.
  double log_marginal_likelihood(const gp_hyper& hyper, Eigen::VectorXd* gradient = nullptr) const;
  /// At the current hyperparameters.
  double log_marginal_likelihood() const { return log_marginal_likelihood(hyper_); }

  const gp_hyper& hyper() const noexcept { return hyper_; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(X_.rows()); }
  std::size_t dimension() const noexcept { return d_; }
  gp_kernel kernel() const noexcept { return opt_.kernel; }
  const gp_options& options() const noexcept { return opt_; }
  /// Changes gp_options::restarts for the next fits (e.g. 1 for cheap warm-started refits between
  /// full ones). Throws kf::error when restarts < 1.
  void set_restarts(int restarts);
  /// The training inputs (n x d) and targets in the caller's units (fantasies included).
  const Eigen::MatrixXd& inputs() const noexcept { return X_; }
  const Eigen::VectorXd& targets() const noexcept { return y_; }
  /// Smallest target (fantasies included); +infinity when n = 0. The default EI incumbent.
  double best_target() const noexcept;
  double y_mean() const noexcept { return y_mean_; }
  double y_std() const noexcept { return y_std_; }
  /// Absolute jitter added to the diagonal of the standardised covariance at the last factorisation.
  double jitter() const noexcept { return jitter_; }
  /// True when nothing factorised and the GP predicts mean(y) with a large variance.
  bool constant_model() const noexcept { return constant_; }
  const gp_fit_report& last_fit() const noexcept { return report_; }

 private:
  struct fit_data;
  void check_inputs(const Eigen::Ref<const Eigen::MatrixXd>& X, const char* what) const;
  void set_data(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y);
  bool factorise(const gp_hyper& h);
  void factorise_or_fall_back(const gp_hyper& h);
  void update_scaled_inputs();
  void solve_alpha();
  gp condition_on(const Eigen::Ref<const Eigen::MatrixXd>& pending, const double* fantasy_y) const;
  // out = K(Xs, X) v in standardised units (the mean when v = alpha).
  void cross_apply(const Eigen::Ref<const Eigen::MatrixXd>& Xs, const Eigen::VectorXd& v,
                   Eigen::Ref<Eigen::VectorXd> out) const;

  std::size_t d_;
  gp_options opt_;
  rng rng_;
  gp_hyper hyper_;
  gp_hyper last_good_;
  gp_fit_report report_;

  Eigen::MatrixXd X_;  // n x d, caller's inputs
  Eigen::VectorXd y_;  // n, caller's units
  Eigen::VectorXd z_;  // n, standardised
  double y_mean_ = 0.0, y_std_ = 1.0;

  // (d + 2) x n, one column per point: the input shifted by -1/2 and divided by the length scales,
  // then 1, then its squared norm (so that one product gives squared distances).
  Eigen::MatrixXd scaled_t_;
  Eigen::MatrixXd chol_;   // capacity x capacity; the top-left n x n lower triangle is L
  Eigen::VectorXd w_;      // L^-1 z
  Eigen::VectorXd alpha_;  // (K + noise I)^-1 z
  double jitter_ = 0.0;
  bool constant_ = false;
};

/// A sparse (inducing-point) approximation of a gp, made by gp::sparse_approximation: with m inducing
/// inputs Z among the training inputs, the subset-of-regressors mean and the DTC variance (Quinonero-
/// Candela and Rasmussen 2005) of the same kernel, hyperparameters, noise and standardisation:
///   mean(x) = k_Z(x)' (K_ZZ + K_ZX K_XZ / s)^-1 K_ZX z / s,   s = noise + the GP's jitter,
///   var(x)  = k(x, x) - k_Z(x)' (K_ZZ^-1 - (K_ZZ + K_ZX K_XZ / s)^-1) k_Z(x),
/// the second term projected to gp_sparse_options::variance_rank directions. With Z = all training
/// inputs and the full rank both equal the exact posterior (up to the 1e-8 s2 jitter on K_ZZ); with
/// fewer they are an approximation without an error bound: the mean is smoothed where Z is sparser
/// than the data, and the variance is at least the DTC one. For screening (acquisition::spec::screening),
/// not for reporting predictions.
class gp_sparse {
 public:
  /// Approximate posterior mean and variance of the latent f at the rows of Xs (caller's units; finite,
  /// variance in [1e-12 sd^2, s2 sd^2]). O(m d + m r) per point, blocked and on TBB's threads like
  /// gp::predict. Throws kf::error on a wrong dimension, a NaN input or an output size mismatch.
  void predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean,
               Eigen::Ref<Eigen::VectorXd> variance) const;
  /// The inducing points: rows of the GP's inputs(), in the order they were chosen.
  const std::vector<std::size_t>& inducing() const noexcept { return inducing_; }
  /// False when the inducing covariance did not factorise even with jitter, or the weights came out
  /// non-finite: predict() then gives the prior (mean of y, variance s2), useless for screening.
  bool valid() const noexcept;
  /// Directions kept in the variance (min(variance_rank, m)).
  std::size_t variance_rank() const noexcept {
    return weights_.cols() > 0 ? static_cast<std::size_t>(weights_.cols() - 1) : 0;
  }

 private:
  friend class gp;
  gp_sparse() = default;
  std::size_t d_ = 0;
  gp_options opt_{};
  gp_hyper hyper_{};
  double y_mean_ = 0.0, y_std_ = 1.0;
  bool constant_ = true;            // predicts like a GP without data or a constant model
  double constant_variance_ = 1.0;  // standardised, when constant_
  std::vector<std::size_t> inducing_{};
  Eigen::MatrixXd scaled_t_{};            // (d + 2) x m, as gp's: the scaled inducing inputs, 1, |.|^2
  Eigen::MatrixXd weights_{};             // m x (1 + r): the mean's weights, then the variance projection
  std::vector<double> weights_padded_{};  // the same, row-major, columns padded to a multiple of 4
};

}  // namespace kf
