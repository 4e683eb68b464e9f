// kf::acquisition: acquisition functions of Bayesian optimisation, for minimisation of y.
//
// Every score is "larger is better": EI and PI of improving on the incumbent `best` (by at least
// xi), log-EI, LCB as beta * sd - mean (the negated lower confidence bound), Thompson sampling as
// minus a posterior draw. Means and standard deviations are of the latent f in the caller's units
// (gp::predict without noise).
//
// Contracts: the scalar functions never throw and never return NaN for finite arguments; sd <= 0 is
// the deterministic limit (EI = max(best - xi - mean, 0), PI = [mean < best - xi]). log-EI is finite
// wherever EI > 0 mathematically and z = (best - xi - mean) / sd is above about -1e154 (it follows
// Ament et al. 2023, "Unexpected improvements to expected improvement": log h(z) with
// h(z) = phi(z) + z Phi(z), through erfcx and an asymptotic series in the far tail).
// select() with the default spec::screening (exact) returns the candidates a brute-force evaluation of
// the acquisition would return (up to the last ulp of a tie), even when it skips exact variances (see
// `spec::prune`). With screening::sparse on a large model it returns the brute-force result among the
// candidates a sparse GP kept, which may miss the true argmax (docs/gp.md measures how often).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "kforge/gp.hpp"
#include "kforge/random.hpp"

namespace kf::acquisition {

/// The scaled complementary error function exp(x^2) erfc(x); relative error ~1e-15, +inf below
/// x = -26.6.
double erfcx(double x) noexcept;
/// log(phi(z) + z Phi(z)), accurate for every z (to -inf only when z^2 overflows).
double log_h(double z) noexcept;

double expected_improvement(double mean, double sd, double best, double xi = 0.0) noexcept;
double log_expected_improvement(double mean, double sd, double best, double xi = 0.0) noexcept;
double probability_of_improvement(double mean, double sd, double best, double xi = 0.0) noexcept;
/// beta * sd - mean: the lower confidence bound mean - beta * sd, negated so that larger is better.
double lower_confidence_bound(double mean, double sd, double beta) noexcept;

enum class kind { ei, log_ei, pi, lcb, thompson };

/// Which candidates reach the exact stage of select() (see spec::screening).
enum class screening { exact, sparse };

struct spec {
  kind type = kind::log_ei;
  double xi = 0.0;    ///< ei, log_ei, pi: required improvement
  double beta = 2.0;  ///< lcb: weight of the standard deviation
  /// ei, log_ei, pi: the incumbent; default gp::best_target() (fantasies included).
  std::optional<double> best = std::nullopt;
  /// thompson: how the joint draw is made (see gp_sample_options).
  gp_sample_options sampling{};
  /// ei, log_ei, pi, lcb: compute the exact O(n^2) variance only for candidates whose score, bounded
  /// above through gp::predict_mean_and_variance_bound, can still reach the k best: first with a
  /// cheap bound for all candidates (bound_neighbours), then with a tighter one (refined_neighbours,
  /// at most 16; not more than bound_neighbours: no refinement) for those the cheap bound keeps.
  /// Below 128 training points select() evaluates every candidate exactly, below 256 it skips the
  /// refinement: there the exact variance is about as cheap as the bounds.
  bool prune = true;
  std::size_t bound_neighbours = 4;
  std::size_t refined_neighbours = 16;
  /// Empty, or one entry per candidate added to the GP's posterior mean (caller's units): a prior
  /// mean function under a GP that models the residual (e.g. what other GPUs' records predict,
  /// docs/transfer.md). Pass `best` in the same units as mean + offset.
  Eigen::VectorXd mean_offset{};
  /// ei, log_ei, pi, lcb: exact = every candidate goes to the exact stage (the result equals brute
  /// force). sparse = when the GP has at least screen_min_points training points and there are more
  /// than screen_keep candidates, the acquisition is first computed for every candidate from a sparse
  /// GP (gp::sparse_approximation with `sparse`: O(m) kernel values per candidate instead of O(n)), and
  /// only the screen_keep best by that score (ties to the lower index) go to the exact stage, which
  /// returns the brute-force result among them. Otherwise sparse is exact.
  screening screen = screening::exact;
  std::size_t screen_min_points = 500;
  std::size_t screen_keep = 2048;
  gp_sparse_options sparse{};
};

/// Scores of points with the given predicted means and variances (for ei, log_ei, pi, lcb; thompson
/// throws kf::error here, it needs the GP). out has mean.size() entries.
void score(const spec& s, double best, const Eigen::Ref<const Eigen::VectorXd>& mean,
           const Eigen::Ref<const Eigen::VectorXd>& variance, Eigen::Ref<Eigen::VectorXd> out);

struct choice {
  std::size_t index = 0;  ///< row of the candidate matrix
  double score = 0.0;
};

struct selection {
  std::vector<choice> top{};        ///< best first; ties go to the lower index
  std::size_t exact_variances = 0;  ///< candidates whose exact variance was computed
  std::size_t refined_bounds = 0;   ///< candidates that got the refined bound
  std::size_t screened = 0;         ///< candidates the sparse screening kept (0: no screening)
};

/// The k best rows of `candidates` (min(k, rows) of them) under the acquisition `s`. thompson needs
/// `r` (one joint draw is made; for a batch of Thompson samples call once per batch element) and
/// throws kf::error without it. A mean_offset of the wrong size throws kf::error.
selection select(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s,
                 std::size_t k, rng* r = nullptr);
/// The best row; throws kf::error when there is no candidate.
choice argmax(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s,
              rng* r = nullptr);

}  // namespace kf::acquisition
