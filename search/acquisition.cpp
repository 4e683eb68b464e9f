// kf::acquisition: see include/kforge/acquisition.hpp for the contracts and docs/gp.md.
#include "kforge/acquisition.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include <tbb/parallel_for.h>

#include "kforge/error.hpp"

namespace kf::acquisition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Training-set sizes from which select() prunes, and refines its bound (measured break-even points:
// docs/gp.md). They change the cost only, never the result.
constexpr std::size_t kPruneMin = 128;
constexpr std::size_t kRefineMin = 256;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kLogSqrt2Pi = 0.91893853320467274178;      // log(2 pi) / 2
constexpr double kLogSqrtPiOver2 = 0.22579135264472743236;  // log(pi / 2) / 2
constexpr double kInvSqrtPi = 0.56418958354775628695;

// exp(x^2) with x^2 = hi + lo split exactly (Dekker): rounding x^2 first would cost up to x^2 ulps.
double exp_square(double x) {
  const double hi = x * x;
  const double c = 134217729.0 * x;  // 2^27 + 1
  const double xh = c - (c - x), xl = x - xh;
  const double lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl;
  return std::exp(hi) * (1.0 + lo);
}

// log(1 - exp(a)) for a < 0 (Maechler's switch between the two stable forms).
double log1mexp(double a) {
  return a > -0.6931471805599453 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z * kInvSqrt2);
}
double normal_pdf(double z) {
  return kInvSqrt2Pi * std::exp(-0.5 * z * z);
}

bool is_prunable(const spec& s) {
  switch (s.type) {
    case kind::ei:
    case kind::log_ei:
    case kind::pi:
      return true;
    case kind::lcb:
      return s.beta >= 0;  // the score grows with sd only for beta >= 0
    case kind::thompson:
      return false;
  }
  return false;
}

// Orders choices best first: larger score, then lower index. NaN counts as -infinity.
bool better(const choice& a, const choice& b) {
  const double sa = std::isnan(a.score) ? -kInf : a.score, sb = std::isnan(b.score) ? -kInf : b.score;
  return sa != sb ? sa > sb : a.index < b.index;
}

std::vector<choice> top_of(const Eigen::VectorXd& scores, std::size_t k) {
  std::vector<choice> all(static_cast<std::size_t>(scores.size()));
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i] = {i, scores(static_cast<Eigen::Index>(i))};
  k = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), better);
  all.resize(k);
  return all;
}

}  // namespace

double erfcx(double x) noexcept {
  if (std::isnan(x)) return x;
  if (x < 0) return x < -26.6 ? kInf : 2.0 * exp_square(x) - erfcx(-x);
  if (x < 26.0) return exp_square(x) * std::erfc(x);
  // Asymptotic series: erfcx(x) = 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k; at x >= 26 the
  // first omitted term is below 2e-15.
  const double t = 1.0 / (2.0 * x * x);
  const double s = 1.0 - t * (1.0 - 3.0 * t * (1.0 - 5.0 * t * (1.0 - 7.0 * t * (1.0 - 9.0 * t))));
  return kInvSqrtPi / x * s;
}

double log_h(double z) noexcept {
  if (std::isnan(z)) return z;
  if (z > -1.0) return std::log(normal_pdf(z) + z * normal_cdf(z));
  // h(z) = phi(z) (1 - |z| sqrt(pi/2) erfcx(|z|/sqrt 2)) for z < 0.
  const double az = -z;
  const double log_phi = -0.5 * z * z - kLogSqrt2Pi;
  if (az <= 30.0) return log_phi + log1mexp(std::log(az * erfcx(az * kInvSqrt2)) + kLogSqrtPiOver2);
  // Far tail: 1 - |z| sqrt(pi/2) erfcx(|z|/sqrt 2) = z^-2 (1 - 3 z^-2 + 15 z^-4 - 105 z^-6 + ...),
  // whose first omitted term is below 3e-13 at |z| = 30.
  const double u = 1.0 / (z * z);
  const double series = u * (-3.0 + u * (15.0 + u * (-105.0 + u * (945.0 - 10395.0 * u))));
  return log_phi - 2.0 * std::log(az) + std::log1p(series);
}

double expected_improvement(double mean, double sd, double best, double xi) noexcept {
  const double imp = best - xi - mean;
  if (!(sd > 0)) return std::max(imp, 0.0);
  const double z = imp / sd;
  const double h = z > -1.0 ? normal_pdf(z) + z * normal_cdf(z) : std::exp(log_h(z));
  return sd * h;
}

double log_expected_improvement(double mean, double sd, double best, double xi) noexcept {
  const double imp = best - xi - mean;
  if (!(sd > 0)) return imp > 0 ? std::log(imp) : -kInf;
  return std::log(sd) + log_h(imp / sd);
}

double probability_of_improvement(double mean, double sd, double best, double xi) noexcept {
  const double imp = best - xi - mean;
  if (!(sd > 0)) return imp > 0 ? 1.0 : 0.0;
  return normal_cdf(imp / sd);
}

double lower_confidence_bound(double mean, double sd, double beta) noexcept {
  return beta * sd - mean;
}

void score(const spec& s, double best, const Eigen::Ref<const Eigen::VectorXd>& mean,
           const Eigen::Ref<const Eigen::VectorXd>& variance, Eigen::Ref<Eigen::VectorXd> out) {
  if (s.type == kind::thompson)
    throw error("kf::acquisition::score: Thompson sampling needs the GP (use select)");
  if (mean.size() != variance.size() || out.size() != mean.size())
    throw error("kf::acquisition::score: mean, variance and output sizes differ");
  const auto body = [&](Eigen::Index begin, Eigen::Index end) {
    for (Eigen::Index i = begin; i < end; ++i) {
      const double mu = mean(i), sd = std::sqrt(std::max(variance(i), 0.0));
      switch (s.type) {
        case kind::ei:
          out(i) = expected_improvement(mu, sd, best, s.xi);
          break;
        case kind::log_ei:
          out(i) = log_expected_improvement(mu, sd, best, s.xi);
          break;
        case kind::pi:
          out(i) = probability_of_improvement(mu, sd, best, s.xi);
          break;
        case kind::lcb:
          out(i) = lower_confidence_bound(mu, sd, s.beta);
          break;
        case kind::thompson:
          break;
      }
    }
  };
  constexpr Eigen::Index grain = 4096;
  if (mean.size() <= grain) {
    body(0, mean.size());
    return;
  }
  tbb::parallel_for(Eigen::Index{0}, (mean.size() + grain - 1) / grain,
                    [&](Eigen::Index c) { body(c * grain, std::min(mean.size(), (c + 1) * grain)); });
}

namespace {

// The k best (k >= 1) of `candidates` under the exact posterior (not Thompson sampling): brute force,
// or branch and bound on variance bounds with the same result (spec::prune).
selection select_exact(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s,
                       std::size_t k, double best) {
  selection out;
  const Eigen::Index m = candidates.rows();
  const bool offset = s.mean_offset.size() > 0;
  // Below kPruneMin training points an exact variance (O(n^2)) costs about what the bound does.
  if (!s.prune || !is_prunable(s) || model.size() < kPruneMin || model.constant_model()) {
    gp_prediction p = model.predict(candidates);
    if (offset) p.mean += s.mean_offset;
    Eigen::VectorXd sc(m);
    score(s, best, p.mean, p.variance, sc);
    out.top = top_of(sc, k);
    out.exact_variances = static_cast<std::size_t>(m);
    return out;
  }

  // Branch and bound: every score grows with sd (PI only where mean >= best - xi; elsewhere it is
  // bounded by 1), so the score at an upper bound of the variance bounds the exact score. Candidates
  // are taken in order of decreasing cheap bound (bound_neighbours); each batch of them gets the
  // tighter bound (refined_neighbours), and exact variances are computed in order of that bound until
  // the k-th best exact score beats the next bound. Every skipped candidate has a bound below the
  // final k-th score, so the result is the brute-force one.
  // The offset of candidate i of `rows`: of candidate idx[i], or of i itself when idx is null.
  const auto add_offset = [&](Eigen::VectorXd& mean, const std::size_t* idx) {
    if (!offset) return;
    for (Eigen::Index i = 0; i < mean.size(); ++i)
      mean(i) += s.mean_offset(idx ? static_cast<Eigen::Index>(idx[i]) : i);
  };
  const auto bound_scores = [&](const Eigen::Ref<const Eigen::MatrixXd>& rows, const std::size_t* idx,
                                std::size_t neighbours, Eigen::VectorXd& bound) {
    Eigen::VectorXd mean(rows.rows()), var_bound(rows.rows());
    bound.resize(rows.rows());
    model.predict_mean_and_variance_bound(rows, mean, var_bound, neighbours);
    add_offset(mean, idx);
    score(s, best, mean, var_bound, bound);
    if (s.type == kind::pi)
      for (Eigen::Index i = 0; i < rows.rows(); ++i)
        if (best - s.xi - mean(i) > 0) bound(i) = 1.0;
  };
  const auto by_bound = [](const Eigen::VectorXd& bound) {
    return [&bound](std::size_t a, std::size_t b) {
      return better({a, bound(static_cast<Eigen::Index>(a))}, {b, bound(static_cast<Eigen::Index>(b))});
    };
  };
  Eigen::VectorXd bound;
  bound_scores(candidates, nullptr, s.bound_neighbours, bound);
  // Candidates by decreasing bound, sorted lazily: only the prefix that is reached gets sorted.
  std::vector<std::size_t> order(static_cast<std::size_t>(m));
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::size_t sorted_end = 0;
  const auto sort_prefix = [&](std::size_t upto) {
    upto = std::min(upto, order.size());
    if (upto <= sorted_end) return;
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(sorted_end);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(upto);
    if (last != order.end()) std::nth_element(first, last, order.end(), by_bound(bound));
    std::sort(first, last, by_bound(bound));
    sorted_end = upto;
  };
  const bool refine = s.refined_neighbours > s.bound_neighbours && model.size() >= kRefineMin;

  // Min-heap of the k best so far: the worst of them on top.
  std::priority_queue<choice, std::vector<choice>, decltype(&better)> heap(&better);
  const auto beaten = [&](double b) { return heap.size() == k && (heap.top().score > b || std::isnan(b)); };
  const auto gather = [&](const std::size_t* idx, Eigen::Index count) {
    Eigen::MatrixXd rows(count, candidates.cols());
    for (Eigen::Index i = 0; i < count; ++i)
      rows.row(i) = candidates.row(static_cast<Eigen::Index>(idx[i]));
    return rows;
  };
  std::size_t pos = 0;
  std::size_t batch = std::max<std::size_t>(2 * k, 256), exact_batch = std::max<std::size_t>(k, 32);
  Eigen::VectorXd refined, bm, bv, bs;
  while (pos < order.size()) {
    sort_prefix(pos + batch);
    if (beaten(bound(static_cast<Eigen::Index>(order[pos])))) break;
    std::size_t b = std::min(batch, order.size() - pos);
    while (b > 1 && beaten(bound(static_cast<Eigen::Index>(order[pos + b - 1]))))
      --b;
    std::vector<std::size_t> idx(order.begin() + static_cast<std::ptrdiff_t>(pos),
                                 order.begin() + static_cast<std::ptrdiff_t>(pos + b));
    std::vector<std::size_t> local(b);
    std::iota(local.begin(), local.end(), std::size_t{0});
    if (refine) {
      bound_scores(gather(idx.data(), static_cast<Eigen::Index>(b)), idx.data(), s.refined_neighbours,
                   refined);
      out.refined_bounds += b;
    } else {
      refined.resize(static_cast<Eigen::Index>(b));
      for (std::size_t i = 0; i < b; ++i)
        refined(static_cast<Eigen::Index>(i)) = bound(static_cast<Eigen::Index>(idx[i]));
    }
    std::sort(local.begin(), local.end(), by_bound(refined));
    for (std::size_t j = 0; j < b && !beaten(refined(static_cast<Eigen::Index>(local[j])));) {
      std::vector<std::size_t> sub;
      for (; j < b && sub.size() < exact_batch && !beaten(refined(static_cast<Eigen::Index>(local[j]))); ++j)
        sub.push_back(idx[local[j]]);
      const auto c = static_cast<Eigen::Index>(sub.size());
      bm.resize(c);
      bv.resize(c);
      bs.resize(c);
      model.predict(gather(sub.data(), c), bm, bv);
      add_offset(bm, sub.data());
      score(s, best, bm, bv, bs);
      for (Eigen::Index i = 0; i < c; ++i) {
        const choice ch{sub[static_cast<std::size_t>(i)], bs(i)};
        if (heap.size() < k) {
          heap.push(ch);
        } else if (better(ch, heap.top())) {
          heap.pop();
          heap.push(ch);
        }
      }
      out.exact_variances += sub.size();
      exact_batch = std::min<std::size_t>(2 * exact_batch, 512);
    }
    pos += b;
    batch = std::min<std::size_t>(2 * batch, 4096);
  }
  out.top.resize(heap.size());
  for (std::size_t i = heap.size(); i-- > 0;) {
    out.top[i] = heap.top();
    heap.pop();
  }
  return out;
}

// Whether select() screens with a sparse GP (spec::screening).
bool screens(const gp& model, Eigen::Index candidates, const spec& s) {
  return s.screen == screening::sparse && s.type != kind::thompson && !model.constant_model() &&
         model.size() >= s.screen_min_points && s.screen_keep > 0 &&
         static_cast<std::size_t>(candidates) > s.screen_keep;
}

// The spec::screen_keep candidates with the best acquisition under the sparse approximation of `model`,
// in increasing index order (ties to the lower index); empty when the approximation is not valid.
std::vector<std::size_t> sparse_screen(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates,
                                       const spec& s, double best) {
  const gp_sparse approx = model.sparse_approximation(s.sparse);
  if (!approx.valid()) return {};
  const Eigen::Index m = candidates.rows();
  Eigen::VectorXd mean(m), variance(m), approx_score(m);
  approx.predict(candidates, mean, variance);
  if (s.mean_offset.size() > 0) mean += s.mean_offset;
  score(s, best, mean, variance, approx_score);
  std::vector<choice> all(static_cast<std::size_t>(m));
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i] = {i, approx_score(static_cast<Eigen::Index>(i))};
  const auto keep = static_cast<std::ptrdiff_t>(std::min(s.screen_keep, all.size()));
  std::nth_element(all.begin(), all.begin() + keep, all.end(), better);  // `better` is a strict total order
  std::vector<std::size_t> kept(static_cast<std::size_t>(keep));
  for (std::size_t i = 0; i < kept.size(); ++i)
    kept[i] = all[i].index;
  std::sort(kept.begin(), kept.end());
  return kept;
}

// The exact stage on the kept rows only; indices mapped back to `candidates`.
selection select_among(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s,
                       std::size_t k, double best, const std::vector<std::size_t>& kept) {
  const auto count = static_cast<Eigen::Index>(kept.size());
  Eigen::MatrixXd rows(count, candidates.cols());
  spec sub = s;
  if (s.mean_offset.size() > 0) sub.mean_offset.resize(count);
  for (Eigen::Index i = 0; i < count; ++i) {
    const auto at = static_cast<Eigen::Index>(kept[static_cast<std::size_t>(i)]);
    rows.row(i) = candidates.row(at);
    if (s.mean_offset.size() > 0) sub.mean_offset(i) = s.mean_offset(at);
  }
  selection out = select_exact(model, rows, sub, std::min<std::size_t>(k, kept.size()), best);
  for (auto& c : out.top)
    c.index = kept[c.index];
  out.screened = kept.size();
  return out;
}

}  // namespace

selection select(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s,
                 std::size_t k, rng* r) {
  selection out;
  const Eigen::Index m = candidates.rows();
  k = std::min<std::size_t>(k, static_cast<std::size_t>(m));
  if (s.type == kind::thompson && !r) throw error("kf::acquisition::select: Thompson sampling needs an rng");
  const bool offset = s.mean_offset.size() > 0;
  if (offset && s.mean_offset.size() != m)
    throw error("kf::acquisition::select: mean_offset has " + std::to_string(s.mean_offset.size()) +
                " entries for " + std::to_string(m) + " candidates");
  if (k == 0) return out;
  if (s.type == kind::thompson) {
    Eigen::VectorXd draw = model.sample_posterior(candidates, *r, s.sampling);
    if (offset) draw += s.mean_offset;
    out.top = top_of(-draw, k);
    return out;
  }
  const double best = s.best.value_or(model.best_target());
  if (screens(model, m, s)) {
    const std::vector<std::size_t> kept = sparse_screen(model, candidates, s, best);
    if (!kept.empty()) return select_among(model, candidates, s, k, best, kept);
  }
  return select_exact(model, candidates, s, k, best);
}

choice argmax(const gp& model, const Eigen::Ref<const Eigen::MatrixXd>& candidates, const spec& s, rng* r) {
  if (candidates.rows() == 0) throw error("kf::acquisition::argmax: there is no candidate");
  return select(model, candidates, s, 1, r).top.front();
}

}  // namespace kf::acquisition
