// kf::gp: see include/kforge/gp.hpp for the contracts and docs/gp.md for the numerics.
#include "kforge/gp.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <string>

#include <LBFGSB.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>
#include <tbb/task_arena.h>
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <Eigen/Eigenvalues>

// Hand-written SSE2 for the hot exp and kernel loops on baseline x86-64 builds; builds with AVX2 or
// wider vectors (-march=native) get Eigen's packet math, which is faster there.
#if defined(__SSE2__) && !defined(__AVX2__)
#define KF_GP_SSE2 1
#include <emmintrin.h>
#endif

#include "gp_simd.hpp"
#include "kforge/error.hpp"

namespace kf {
namespace {

using row_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kLog2Pi = 1.8378770664093453;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Floor of the standardised latent variance returned by predictions.
constexpr double kVarianceFloor = 1e-12;
// Jitter schedule, relative to the mean diagonal of the covariance: 0 first, then 1e-10 .. 1e-2.
constexpr std::array<double, 10> kJitter = {0, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2};
// Candidates per block of a prediction: the cross-covariance block is kBlock x n.
constexpr Eigen::Index kBlock = 128;
// Matrices from this size on are factorised, inverted and built with TBB (when options allow).
constexpr Eigen::Index kParallelMin = 256;
// Upper limit on the neighbours of the variance bound (a fixed-size small system).
constexpr std::size_t kMaxNeighbours = 16;

// ---- exp over arrays ----------------------------------------------------------------------------
// std::exp costs ~5 ns here, and Eigen's packet exp is no faster on SSE2 (it emulates the 64-bit
// integer ldexp). The kernel blocks need ~1e8 exponentials per prediction of 1e5 points, so: a table
// of 2^(j/64) and a degree-5 polynomial on |r| <= ln2/128 (relative error < 5e-16), two lanes at a
// time. Every element takes the same path (the odd last one through a padded packet), so a value
// does not depend on its position in the array. Inputs below -708 give 0.
#if defined(KF_GP_SSE2)
constexpr double kExpTableN = 64;
struct exp_table {
  alignas(16) double v[64];
  exp_table() {
    for (int j = 0; j < 64; ++j)
      v[j] = std::exp2(j / kExpTableN);
  }
};
const exp_table kExpTable;

inline __m128d exp_packet(__m128d x0) {
  const __m128d scale = _mm_set1_pd(kExpTableN * 1.4426950408889634);  // 64 / ln 2
  const __m128d ln2_hi = _mm_set1_pd(0.693145751953125 / kExpTableN);  // exact in few bits
  const __m128d ln2_lo = _mm_set1_pd(1.42860682030941723212e-6 / kExpTableN);
  const __m128d lo = _mm_set1_pd(-708.0), hi = _mm_set1_pd(709.0);
  const __m128d x = _mm_min_pd(_mm_max_pd(x0, lo), hi);
  const __m128i k = _mm_cvtpd_epi32(_mm_mul_pd(x, scale));  // round to nearest
  const __m128d kf = _mm_cvtepi32_pd(k);
  const __m128d r = _mm_sub_pd(_mm_sub_pd(x, _mm_mul_pd(kf, ln2_hi)), _mm_mul_pd(kf, ln2_lo));
  const __m128d r2 = _mm_mul_pd(r, r);
  const __m128d p01 = _mm_add_pd(_mm_set1_pd(1.0), r);
  const __m128d p23 = _mm_add_pd(_mm_set1_pd(0.5), _mm_mul_pd(r, _mm_set1_pd(1.0 / 6)));
  const __m128d p45 = _mm_add_pd(_mm_set1_pd(1.0 / 24), _mm_mul_pd(r, _mm_set1_pd(1.0 / 120)));
  const __m128d p = _mm_add_pd(p01, _mm_mul_pd(r2, _mm_add_pd(p23, _mm_mul_pd(r2, p45))));
  const __m128i j = _mm_and_si128(k, _mm_set1_epi32(63));
  const int j0 = _mm_cvtsi128_si32(j), j1 = _mm_cvtsi128_si32(_mm_shuffle_epi32(j, 1));
  const __m128d t = _mm_loadh_pd(_mm_load_sd(kExpTable.v + j0), kExpTable.v + j1);
  const __m128i e = _mm_add_epi32(_mm_srai_epi32(k, 6), _mm_set1_epi32(1023));
  const __m128i bits = _mm_slli_epi32(_mm_unpacklo_epi32(_mm_setzero_si128(), e), 20);
  const __m128d res = _mm_mul_pd(_mm_mul_pd(p, t), _mm_castsi128_pd(bits));
  return _mm_and_pd(res, _mm_cmpge_pd(x0, lo));  // 0 below the range; NaN stays NaN (mask is 0: 0)
}

void exp_inplace(double* p, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128d a = _mm_loadu_pd(p + i), b = _mm_loadu_pd(p + i + 2);
    _mm_storeu_pd(p + i, exp_packet(a));
    _mm_storeu_pd(p + i + 2, exp_packet(b));
  }
  for (; i + 2 <= n; i += 2)
    _mm_storeu_pd(p + i, exp_packet(_mm_loadu_pd(p + i)));
  if (i < n) _mm_store_sd(p + i, exp_packet(_mm_set_pd(0.0, p[i])));
}
#else
void exp_inplace(double* p, std::size_t n) {
  Eigen::Map<Eigen::ArrayXd> a(p, static_cast<Eigen::Index>(n));
  a = a.exp();
}
#endif

// Runs a and b, in parallel when asked to (they must touch disjoint data).
template <class A, class B>
void run_both(bool parallel, const A& a, const B& b) {
  if (parallel) {
    tbb::parallel_invoke(a, b);
  } else {
    a();
    b();
  }
}

// f(0) .. f(count - 1), on TBB's threads when asked to (they must touch disjoint data).
template <class F>
void for_each_index(bool parallel, Eigen::Index count, const F& f) {
  if (parallel && count > 1) {
    tbb::parallel_for(Eigen::Index{0}, count, f);
  } else {
    for (Eigen::Index i = 0; i < count; ++i)
      f(i);
  }
}

// ---- kernels --------------------------------------------------------------------------------------
// In terms of q = r^2, the squared distance of inputs divided by the length scales:
//   rbf:      k = s2 exp(-q/2)                  dk/dlog l_j = s2 exp(-q/2) u_j^2
//   matern32: k = s2 (1 + a r) exp(-a r), a=√3  dk/dlog l_j = 3 s2 exp(-a r) u_j^2
//   matern52: k = s2 (1 + a r + a²q/3) e^(-a r), a=√5
//                                               dk/dlog l_j = (5/3) s2 (1 + a r) exp(-a r) u_j^2
// with u_j the scaled difference in dimension j; the factor in front of u_j^2 is "f" below.

// k[i] = kernel(q[i]); f[i] = the gradient factor when f is not null. q and k may alias.
void kernel_values(gp_kernel kind, double s2, const double* q, double* k, double* f, std::size_t n) {
  constexpr std::size_t chunk = 256;
  alignas(16) double rb[chunk];
  alignas(16) double eb[chunk];
  for (std::size_t at = 0; at < n; at += chunk) {
    const auto c = static_cast<Eigen::Index>(std::min(chunk, n - at));
    Eigen::Map<const Eigen::ArrayXd> qa(q + at, c);
    Eigen::Map<Eigen::ArrayXd> ka(k + at, c), r(rb, c), e(eb, c);
    switch (kind) {
      case gp_kernel::rbf:
        e = -0.5 * qa.max(0.0);
        exp_inplace(eb, static_cast<std::size_t>(c));
        if (f) Eigen::Map<Eigen::ArrayXd>(f + at, c) = s2 * e;
        ka = s2 * e;
        break;
      case gp_kernel::matern32:
        r = (3.0 * qa.max(0.0)).sqrt();
        e = -r;
        exp_inplace(eb, static_cast<std::size_t>(c));
        if (f) Eigen::Map<Eigen::ArrayXd>(f + at, c) = (3.0 * s2) * e;
        ka = s2 * (1.0 + r) * e;
        break;
      case gp_kernel::matern52:
        r = (5.0 * qa.max(0.0)).sqrt();
        e = -r;
        exp_inplace(eb, static_cast<std::size_t>(c));
        if (f) Eigen::Map<Eigen::ArrayXd>(f + at, c) = (5.0 / 3.0 * s2) * (1.0 + r) * e;
        ka = s2 * (1.0 + r + r.square() * (1.0 / 3.0)) * e;
        break;
    }
  }
}

// k[i] = kernel(q[i]) in place, in one pass (the hot loop of predictions: no intermediate arrays).
// With AVX2 and FMA at run time: gp_simd::kernel_inplace (about 2x faster than the SSE2 loop below).
#if defined(KF_GP_SSE2)
template <gp_kernel kind>
inline __m128d kernel_packet(__m128d q, __m128d s2) {
  q = _mm_max_pd(_mm_setzero_pd(), q);  // rounding can make q slightly negative; NaN stays NaN
  const __m128d one = _mm_set1_pd(1.0);
  if constexpr (kind == gp_kernel::rbf) {
    return _mm_mul_pd(s2, exp_packet(_mm_mul_pd(q, _mm_set1_pd(-0.5))));
  } else if constexpr (kind == gp_kernel::matern32) {
    const __m128d r = _mm_sqrt_pd(_mm_mul_pd(q, _mm_set1_pd(3.0)));
    return _mm_mul_pd(_mm_mul_pd(s2, _mm_add_pd(one, r)), exp_packet(_mm_sub_pd(_mm_setzero_pd(), r)));
  } else {
    const __m128d r = _mm_sqrt_pd(_mm_mul_pd(q, _mm_set1_pd(5.0)));
    const __m128d poly = _mm_add_pd(_mm_add_pd(one, r), _mm_mul_pd(_mm_mul_pd(r, r), _mm_set1_pd(1.0 / 3.0)));
    return _mm_mul_pd(_mm_mul_pd(s2, poly), exp_packet(_mm_sub_pd(_mm_setzero_pd(), r)));
  }
}

template <gp_kernel kind>
void kernel_inplace_impl(double s2, double* q, std::size_t n) {
  const __m128d vs2 = _mm_set1_pd(s2);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128d a = _mm_loadu_pd(q + i), b = _mm_loadu_pd(q + i + 2);
    _mm_storeu_pd(q + i, kernel_packet<kind>(a, vs2));
    _mm_storeu_pd(q + i + 2, kernel_packet<kind>(b, vs2));
  }
  for (; i + 2 <= n; i += 2)
    _mm_storeu_pd(q + i, kernel_packet<kind>(_mm_loadu_pd(q + i), vs2));
  if (i < n) _mm_store_sd(q + i, kernel_packet<kind>(_mm_set_pd(0.0, q[i]), vs2));
}

void kernel_inplace_baseline(gp_kernel kind, double s2, double* q, std::size_t n) {
  switch (kind) {
    case gp_kernel::rbf:
      kernel_inplace_impl<gp_kernel::rbf>(s2, q, n);
      break;
    case gp_kernel::matern32:
      kernel_inplace_impl<gp_kernel::matern32>(s2, q, n);
      break;
    case gp_kernel::matern52:
      kernel_inplace_impl<gp_kernel::matern52>(s2, q, n);
      break;
  }
}
#else
void kernel_inplace_baseline(gp_kernel kind, double s2, double* q, std::size_t n) {
  kernel_values(kind, s2, q, q, nullptr, n);
}
#endif

gp_simd::kernel_kind simd_kind(gp_kernel kind) {
  switch (kind) {
    case gp_kernel::rbf:
      return gp_simd::kernel_kind::rbf;
    case gp_kernel::matern32:
      return gp_simd::kernel_kind::matern32;
    case gp_kernel::matern52:
      break;
  }
  return gp_simd::kernel_kind::matern52;
}

void kernel_inplace(gp_kernel kind, double s2, double* q, std::size_t n, bool simd) {
  if (simd && gp_simd::simd_available())
    gp_simd::kernel_inplace(simd_kind(kind), s2, q, n);
  else
    kernel_inplace_baseline(kind, s2, q, n);
}

// Inputs shifted to [-1/2, 1/2] (halves the magnitudes in the |a|^2 + |b|^2 - 2ab form of the
// distances) and divided by the length scales. Rows are points.
Eigen::MatrixXd scale_inputs(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::VectorXd& inv_l) {
  return (X.array() - 0.5).matrix() * inv_l.asDiagonal();
}

// Lower triangle of the m x m covariance (noise on the diagonal) of the scaled points S (m x d), and
// of the gradient factor F when F is not null. The upper triangles are not touched.
void training_kernel(gp_kernel kind, double s2, double noise, const Eigen::MatrixXd& S, Eigen::MatrixXd& K,
                     Eigen::MatrixXd* F, bool parallel) {
  const Eigen::Index m = S.rows();
  const auto columns = [&](Eigen::Index c0, Eigen::Index c1) {
    Eigen::VectorXd q(m);
    for (Eigen::Index c = c0; c < c1; ++c) {
      const Eigen::Index len = m - c;
      auto qs = q.head(len).array();
      qs.setZero();
      for (Eigen::Index j = 0; j < S.cols(); ++j)
        qs += (S.col(j).segment(c, len).array() - S(c, j)).square();
      kernel_values(kind, s2, q.data(), &K(c, c), F ? &(*F)(c, c) : nullptr, static_cast<std::size_t>(len));
      K(c, c) = s2 + noise;  // q = 0 exactly on the diagonal
    }
  };
  // Column c costs m - c: cut at equal areas of the triangle.
  constexpr Eigen::Index parts = 8;
  const auto cut = [&](Eigen::Index p) {
    return static_cast<Eigen::Index>(static_cast<double>(m) *
                                     (1.0 - std::sqrt(1.0 - static_cast<double>(p) / parts)));
  };
  for_each_index(parallel && m >= kParallelMin, parts,
                 [&](Eigen::Index p) { columns(cut(p), p + 1 == parts ? m : cut(p + 1)); });
}

// Cholesky factor of the lower triangle of A, in place (the strict upper triangle is scratch). From
// kParallelMin on, right-looking and blocked, with the panel solve and the trailing update spread over
// TBB when `parallel`; the blocks depend on neither the flag nor the thread count, so the result does
// not either. False when a pivot is not positive.
bool llt_in_place(Eigen::Ref<Eigen::MatrixXd> A, bool parallel) {
  const Eigen::Index n = A.rows();
  if (n < kParallelMin) {
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(A);
    return llt.info() == Eigen::Success;
  }
  constexpr Eigen::Index nb = 128;
  for (Eigen::Index k = 0; k < n; k += nb) {
    const Eigen::Index kb = std::min(nb, n - k), rest = n - k - kb;
    auto A11 = A.block(k, k, kb, kb);
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(A11);
    if (llt.info() != Eigen::Success) return false;
    if (rest == 0) break;
    const Eigen::Index panels = (rest + nb - 1) / nb;
    for_each_index(parallel, panels, [&](Eigen::Index c) {  // A21 <- A21 L11^-T
      const Eigen::Index r0 = k + kb + c * nb;
      auto P = A.block(r0, k, std::min(nb, n - r0), kb);
      A11.transpose().triangularView<Eigen::Upper>().solveInPlace<Eigen::OnTheRight>(P);
    });
    for_each_index(parallel, panels, [&](Eigen::Index c) {  // A22 -= A21 A21', by column blocks
      const Eigen::Index j0 = k + kb + c * nb, jb = std::min(nb, n - j0), rows = n - j0;
      A.block(j0, j0, rows, jb).noalias() -= A.block(j0, k, rows, kb) * A.block(j0, k, jb, kb).transpose();
    });
  }
  return true;
}

// L = chol(K + jitter I) into the top-left m x m of `L` (lower triangle; K's lower triangle is read).
// Tries the jitter schedule; returns the absolute jitter used, or a negative value when nothing
// factorised.
template <class Out>
double cholesky_with_jitter(const Eigen::MatrixXd& K, Eigen::Index m, Out& L, bool parallel) {
  if (m == 0) return 0.0;
  const double mean_diag = K.diagonal().head(m).mean();
  if (!std::isfinite(mean_diag) || mean_diag <= 0) return -1.0;
  for (const double rel : kJitter) {
    const double jit = rel * mean_diag;
    auto A = L.topLeftCorner(m, m);
    A.template triangularView<Eigen::Lower>() = K.topLeftCorner(m, m).template triangularView<Eigen::Lower>();
    A.diagonal().array() += jit;
    if (!llt_in_place(A, parallel)) continue;
    const auto diag = A.diagonal().array();
    if (!diag.isFinite().all() || !(diag > 0.0).all()) continue;
    bool finite = true;
    for (Eigen::Index c = 0; c < m && finite; ++c)
      finite = A.col(c).tail(m - c).allFinite();
    if (!finite) continue;
    return jit;
  }
  return -1.0;
}

// In place: the lower triangle of A is replaced by that of its inverse (A lower triangular, nonsingular).
// Recursive on halves, n^3/3 flops (a triangular solve against the identity costs n^3):
//   [A11 0; A21 A22]^-1 = [A11^-1 0; -A22^-1 A21 A11^-1, A22^-1].
void invert_lower(Eigen::Ref<Eigen::MatrixXd> A, bool parallel) {
  const Eigen::Index n = A.rows();
  if (n <= 64) {
    Eigen::MatrixXd inv = Eigen::MatrixXd::Identity(n, n);
    A.triangularView<Eigen::Lower>().solveInPlace(inv);
    A.triangularView<Eigen::Lower>() = inv;
    return;
  }
  const Eigen::Index n1 = n / 2, n2 = n - n1;
  auto A11 = A.topLeftCorner(n1, n1);
  auto A21 = A.bottomLeftCorner(n2, n1);
  auto A22 = A.bottomRightCorner(n2, n2);
  const bool par = parallel && n >= kParallelMin;
  run_both(
      par, [&] { A22.triangularView<Eigen::Lower>().solveInPlace(A21); }, [&] { invert_lower(A11, par); });
  run_both(
      par,
      [&] {
        const Eigen::MatrixXd t = -(A21 * A11.triangularView<Eigen::Lower>());
        A21 = t;
      },
      [&] { invert_lower(A22, par); });
}

// In place: the lower triangle of A (holding a lower-triangular M) is replaced by that of M' M.
// Recursive, n^3/3 flops: with M = [P 0; Q R], M'M = [P'P + Q'Q, Q'R; R'Q, R'R].
void lower_gram(Eigen::Ref<Eigen::MatrixXd> A, bool parallel) {
  const Eigen::Index n = A.rows();
  if (n <= 64) {
    const Eigen::MatrixXd M = A.triangularView<Eigen::Lower>();
    Eigen::MatrixXd G = Eigen::MatrixXd::Zero(n, n);
    G.selfadjointView<Eigen::Lower>().rankUpdate(M.transpose());
    A.triangularView<Eigen::Lower>() = G;
    return;
  }
  const Eigen::Index n1 = n / 2, n2 = n - n1;
  auto P = A.topLeftCorner(n1, n1);
  auto Q = A.bottomLeftCorner(n2, n1);
  auto R = A.bottomRightCorner(n2, n2);
  const bool par = parallel && n >= kParallelMin;
  Eigen::MatrixXd t;
  run_both(
      par,
      [&] {
        lower_gram(P, par);
        P.selfadjointView<Eigen::Lower>().rankUpdate(Q.transpose());
      },
      [&] { t = R.triangularView<Eigen::Lower>().transpose() * Q; });
  run_both(
      par, [&] { Q = t; }, [&] { lower_gram(R, par); });
}

// Everything one likelihood evaluation needs, reused across the evaluations of one L-BFGS run.
struct lml_workspace {
  Eigen::MatrixXd S, K, F, L, W;
  Eigen::VectorXd alpha;
};

// Log marginal likelihood of z given inputs X under theta, and its gradient w.r.t. theta when `grad`
// is not null. -infinity when no jitter makes the covariance factorise.
double lml_eval(gp_kernel kind, const Eigen::MatrixXd& X, const Eigen::VectorXd& z,
                const Eigen::VectorXd& theta, Eigen::VectorXd* grad, lml_workspace& ws, bool parallel) {
  const Eigen::Index m = X.rows(), d = X.cols();
  if (grad) grad->setZero(d + 2);
  if (m == 0) return 0.0;
  if (!theta.allFinite()) return -kInf;
  const Eigen::VectorXd inv_l = (-theta.head(d).array()).exp().matrix();
  const double s2 = std::exp(theta(d)), noise = std::exp(theta(d + 1));
  ws.S = scale_inputs(X, inv_l);
  ws.K.resize(m, m);
  ws.L.resize(m, m);
  if (grad) ws.F.resize(m, m);
  training_kernel(kind, s2, noise, ws.S, ws.K, grad ? &ws.F : nullptr, parallel);
  if (cholesky_with_jitter(ws.K, m, ws.L, parallel) < 0) return -kInf;
  const auto L = ws.L.triangularView<Eigen::Lower>();
  ws.alpha = L.solve(z);
  const double fit_term = ws.alpha.squaredNorm();  // z' K^-1 z = |L^-1 z|^2
  ws.L.transpose().triangularView<Eigen::Upper>().solveInPlace(ws.alpha);
  const double log_det = 2.0 * ws.L.diagonal().array().log().sum();
  const double lml = -0.5 * fit_term - 0.5 * log_det - 0.5 * static_cast<double>(m) * kLog2Pi;
  if (!std::isfinite(lml)) return -kInf;
  if (!grad) return lml;

  // dlml/dtheta = 1/2 tr(W dK/dtheta), W = alpha alpha' - K^-1 (lower triangle only).
  // K^-1 = L^-T L^-1 as LAPACK's potri does it (2/3 m^3 flops).
  ws.W.resize(m, m);
  ws.W.triangularView<Eigen::Lower>() = ws.L;
  invert_lower(ws.W, parallel);
  lower_gram(ws.W, parallel);
  ws.W.triangularView<Eigen::Lower>() *= -1.0;
  ws.W.selfadjointView<Eigen::Lower>().rankUpdate(ws.alpha, 1.0);
  double g_s2 = 0.5 * s2 * ws.W.diagonal().sum();
  const double g_noise = 0.5 * noise * ws.W.diagonal().sum();
  Eigen::VectorXd g_l = Eigen::VectorXd::Zero(d);
  Eigen::ArrayXd p(m);
  for (Eigen::Index c = 0; c + 1 < m; ++c) {
    const Eigen::Index len = m - c - 1;
    const auto w = ws.W.col(c).segment(c + 1, len).array();
    g_s2 += (w * ws.K.col(c).segment(c + 1, len).array()).sum();
    p.head(len) = w * ws.F.col(c).segment(c + 1, len).array();
    for (Eigen::Index j = 0; j < d; ++j)
      g_l(j) += (p.head(len) * (ws.S.col(j).segment(c + 1, len).array() - ws.S(c, j)).square()).sum();
  }
  grad->head(d) = g_l;
  (*grad)(d) = g_s2;
  (*grad)(d + 1) = g_noise;
  if (!grad->allFinite()) return -kInf;
  return lml;
}

// The L-BFGS-B objective: -lml / m (scaled so that the tolerances do not depend on m). Remembers the
// best point it saw, since the optimiser may stop by throwing.
struct neg_lml {
  gp_kernel kind;
  bool parallel;
  const Eigen::MatrixXd* X;
  const Eigen::VectorXd* z;
  lml_workspace ws;
  int evaluations = 0;
  double best_f = kInf;
  Eigen::VectorXd best_theta;

  double operator()(const Eigen::VectorXd& theta, Eigen::VectorXd& grad) {
    ++evaluations;
    const double scale = 1.0 / static_cast<double>(std::max<Eigen::Index>(X->rows(), 1));
    const double lml = lml_eval(kind, *X, *z, theta, &grad, ws, parallel);
    if (!std::isfinite(lml)) {
      grad.setZero(theta.size());
      return 1e30;  // finite, so that the line search backs off instead of failing on inf
    }
    const double f = -lml * scale;
    grad *= -scale;
    if (f < best_f) {
      best_f = f;
      best_theta = theta;
    }
    return f;
  }
};

double log_uniform(rng& r, double a, double b, double lo, double hi) {
  double la = std::max(std::log(a), std::log(lo)), lb = std::min(std::log(b), std::log(hi));
  if (la > lb) la = std::log(lo), lb = std::log(hi);
  return la + (lb - la) * r.uniform();
}

void require(bool ok, const std::string& what) {
  if (!ok) throw error("kf::gp: " + what);
}

}  // namespace

std::string_view to_string(gp_kernel k) noexcept {
  switch (k) {
    case gp_kernel::matern52:
      return "matern52";
    case gp_kernel::matern32:
      return "matern32";
    case gp_kernel::rbf:
      return "rbf";
  }
  return "?";
}

gp_hyper gp_hyper::defaults(std::size_t d) {
  gp_hyper h;
  h.log_lengthscale = Eigen::VectorXd::Constant(static_cast<Eigen::Index>(d), std::log(0.5));
  return h;
}

Eigen::VectorXd gp_hyper::pack() const {
  const Eigen::Index d = log_lengthscale.size();
  Eigen::VectorXd t(d + 2);
  t.head(d) = log_lengthscale;
  t(d) = log_signal_variance;
  t(d + 1) = log_noise_variance;
  return t;
}

gp_hyper gp_hyper::unpack(const Eigen::VectorXd& theta) {
  require(theta.size() >= 2, "a hyperparameter vector has at least 2 entries");
  const Eigen::Index d = theta.size() - 2;
  gp_hyper h;
  h.log_lengthscale = theta.head(d);
  h.log_signal_variance = theta(d);
  h.log_noise_variance = theta(d + 1);
  return h;
}

gp::gp(std::size_t dimension, gp_options options)
    : d_(dimension), opt_(options), rng_(options.seed), hyper_(gp_hyper::defaults(dimension)) {
  const auto& b = opt_.bounds;
  const auto ok = [](double lo, double hi) {
    return std::isfinite(lo) && std::isfinite(hi) && lo > 0 && lo <= hi;
  };
  require(ok(b.lengthscale_min, b.lengthscale_max), "length-scale bounds must satisfy 0 < min <= max");
  require(ok(b.signal_variance_min, b.signal_variance_max),
          "signal-variance bounds must satisfy 0 < min <= max");
  require(ok(b.noise_variance_min, b.noise_variance_max),
          "noise-variance bounds must satisfy 0 < min <= max");
  require(opt_.restarts >= 1, "restarts must be at least 1");
  require(opt_.max_iterations >= 1, "max_iterations must be at least 1");
  // The defaults, clipped to the bounds.
  hyper_.log_lengthscale =
      hyper_.log_lengthscale.cwiseMax(std::log(b.lengthscale_min)).cwiseMin(std::log(b.lengthscale_max));
  hyper_.log_signal_variance = std::clamp(hyper_.log_signal_variance, std::log(b.signal_variance_min),
                                          std::log(b.signal_variance_max));
  hyper_.log_noise_variance =
      std::clamp(hyper_.log_noise_variance, std::log(b.noise_variance_min), std::log(b.noise_variance_max));
  last_good_ = hyper_;
  X_.resize(0, static_cast<Eigen::Index>(d_));
  update_scaled_inputs();
}

void gp::set_restarts(int restarts) {
  require(restarts >= 1, "restarts must be at least 1");
  opt_.restarts = restarts;
}

double gp::best_target() const noexcept {
  return y_.size() ? y_.minCoeff() : kInf;
}

void gp::check_inputs(const Eigen::Ref<const Eigen::MatrixXd>& X, const char* what) const {
  require(X.cols() == static_cast<Eigen::Index>(d_), std::string(what) + " has " + std::to_string(X.cols()) +
                                                         " columns; the GP has dimension " +
                                                         std::to_string(d_));
  require(X.allFinite(), std::string(what) + " contains a NaN or infinite coordinate");
}

void gp::set_data(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y) {
  check_inputs(X, "the input matrix");
  require(y.size() == X.rows(),
          "got " + std::to_string(X.rows()) + " inputs but " + std::to_string(y.size()) + " targets");
  require(y.allFinite(), "the targets contain a NaN or infinite value");
  X_ = X;
  y_ = y;
  const auto n = static_cast<double>(y.size());
  y_mean_ = y.size() ? y.mean() : 0.0;
  const double var = y.size() ? (y.array() - y_mean_).square().sum() / n : 0.0;
  y_std_ = std::sqrt(var);
  if (!(y_std_ > 1e-12 * std::max(1.0, std::abs(y_mean_))) || !std::isfinite(y_std_)) y_std_ = 1.0;
  z_ = (y_.array() - y_mean_) / y_std_;
}

void gp::update_scaled_inputs() {
  const Eigen::VectorXd inv_l = (-hyper_.log_lengthscale.array()).exp().matrix();
  const Eigen::MatrixXd S = scale_inputs(X_, inv_l);
  const auto d = static_cast<Eigen::Index>(d_);
  scaled_t_.resize(d + 2, S.rows());
  scaled_t_.topRows(d) = S.transpose();
  scaled_t_.row(d).setOnes();
  scaled_t_.row(d + 1) = S.rowwise().squaredNorm().transpose();
}

bool gp::factorise(const gp_hyper& h) {
  const Eigen::Index n = X_.rows();
  if (h.log_lengthscale.size() != static_cast<Eigen::Index>(d_) || !h.pack().allFinite()) return false;
  const gp_hyper saved = hyper_;
  hyper_ = h;
  update_scaled_inputs();
  const double s2 = std::exp(h.log_signal_variance), noise = std::exp(h.log_noise_variance);
  Eigen::MatrixXd K(n, n);
  training_kernel(opt_.kernel, s2, noise, scaled_t_.topRows(static_cast<Eigen::Index>(d_)).transpose(), K,
                  nullptr, opt_.parallel);
  const Eigen::Index cap = n + 32;
  if (chol_.rows() < n) chol_.resize(cap, cap);
  const double jit = cholesky_with_jitter(K, n, chol_, opt_.parallel);
  if (jit < 0) {
    hyper_ = saved;
    update_scaled_inputs();
    return false;
  }
  jitter_ = jit;
  constant_ = false;
  solve_alpha();
  return true;
}

void gp::solve_alpha() {
  const Eigen::Index n = X_.rows();
  const auto L = chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
  w_ = L.solve(z_);
  alpha_ = L.transpose().solve(w_);
}

void gp::factorise_or_fall_back(const gp_hyper& h) {
  if (factorise(h)) {
    last_good_ = hyper_;
    return;
  }
  if (factorise(last_good_)) return;
  // Constant model: predictions ignore chol_ and alpha_.
  constant_ = true;
  jitter_ = 0.0;
  alpha_.setZero(X_.rows());
  w_.setZero(X_.rows());
}

void gp::fit_fixed(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y,
                   const gp_hyper& hyper) {
  require(hyper.log_lengthscale.size() == static_cast<Eigen::Index>(d_),
          "the hyperparameters have " + std::to_string(hyper.log_lengthscale.size()) +
              " length scales; the GP has dimension " + std::to_string(d_));
  set_data(X, y);
  report_ = {};
  report_.points_used = static_cast<std::size_t>(X_.rows());
  factorise_or_fall_back(hyper);
  report_.log_marginal_likelihood = constant_ ? -kInf : log_marginal_likelihood();
}

void gp::refactorise() {
  factorise_or_fall_back(hyper_);
}

void gp::fit(const Eigen::Ref<const Eigen::MatrixXd>& X, const Eigen::Ref<const Eigen::VectorXd>& y) {
  set_data(X, y);
  report_ = {};
  const auto n = static_cast<std::size_t>(X_.rows());
  const bool constant_y =
      n > 0 && (y_.maxCoeff() - y_.minCoeff()) <= 1e-12 * std::max(1.0, std::abs(y_mean_));
  if (n < std::max<std::size_t>(opt_.min_points_to_optimise, 1) || constant_y) {
    report_.points_used = n;
    factorise_or_fall_back(hyper_);
    return;
  }

  // The fitting subset: all points, or a seeded random sample (in index order).
  Eigen::MatrixXd Xs;
  Eigen::VectorXd zs;
  if (opt_.max_fit_points > 0 && n > opt_.max_fit_points) {
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    for (std::size_t i = 0; i < opt_.max_fit_points; ++i)
      std::swap(idx[i], idx[i + rng_.index(n - i)]);
    idx.resize(opt_.max_fit_points);
    std::sort(idx.begin(), idx.end());
    Xs.resize(static_cast<Eigen::Index>(idx.size()), X_.cols());
    zs.resize(static_cast<Eigen::Index>(idx.size()));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      Xs.row(static_cast<Eigen::Index>(i)) = X_.row(static_cast<Eigen::Index>(idx[i]));
      zs(static_cast<Eigen::Index>(i)) = z_(static_cast<Eigen::Index>(idx[i]));
    }
  } else {
    Xs = X_;
    zs = z_;
  }
  report_.points_used = static_cast<std::size_t>(Xs.rows());

  // Bounds and starting points (drawn before any run, so that threads do not change them).
  const auto& b = opt_.bounds;
  const auto d = static_cast<Eigen::Index>(d_);
  Eigen::VectorXd lb(d + 2), ub(d + 2);
  lb.head(d).setConstant(std::log(b.lengthscale_min));
  ub.head(d).setConstant(std::log(b.lengthscale_max));
  lb(d) = std::log(b.signal_variance_min);
  ub(d) = std::log(b.signal_variance_max);
  lb(d + 1) = std::log(b.noise_variance_min);
  ub(d + 1) = std::log(b.noise_variance_max);
  const auto runs = static_cast<std::size_t>(opt_.restarts);
  std::vector<Eigen::VectorXd> starts(runs);
  starts[0] = hyper_.pack().cwiseMax(lb).cwiseMin(ub);
  for (std::size_t r = 1; r < runs; ++r) {
    Eigen::VectorXd t(d + 2);
    for (Eigen::Index j = 0; j < d; ++j)
      t(j) = log_uniform(rng_, 0.05, 2.0, b.lengthscale_min, b.lengthscale_max);
    t(d) = log_uniform(rng_, 0.3, 3.0, b.signal_variance_min, b.signal_variance_max);
    t(d + 1) = log_uniform(rng_, 1e-5, 1e-1, b.noise_variance_min, b.noise_variance_max);
    starts[r] = t;
  }

  struct run_result {
    double f = kInf;
    Eigen::VectorXd theta;
    int evaluations = 0;
    bool failed = false;
  };
  std::vector<run_result> results(runs);
  const auto run = [&](std::size_t r) {
    LBFGSpp::LBFGSBParam<double> param;
    param.max_iterations = opt_.max_iterations;
    param.epsilon = 1e-4;
    param.epsilon_rel = 1e-4;
    param.past = 1;
    param.delta = 1e-7;
    param.max_linesearch = 20;
    LBFGSpp::LBFGSBSolver<double> solver(param);
    neg_lml obj{opt_.kernel, opt_.parallel, &Xs, &zs, {}, 0, kInf, {}};
    Eigen::VectorXd theta = starts[r];
    double f = 0;
    try {
      solver.minimize(obj, theta, f, lb, ub);
    } catch (const std::exception&) {
      results[r].failed = true;  // line search trouble: keep the best point seen
    }
    results[r].f = obj.best_f;
    results[r].theta = obj.best_theta;
    results[r].evaluations = obj.evaluations;
  };
  if (opt_.parallel && runs > 1)
    tbb::parallel_for(std::size_t{0}, runs, run);
  else
    for (std::size_t r = 0; r < runs; ++r)
      run(r);

  std::size_t best = runs;
  for (std::size_t r = 0; r < runs; ++r) {
    report_.evaluations += results[r].evaluations;
    report_.failed_runs += results[r].failed ? 1 : 0;
    if (std::isfinite(results[r].f) && (best == runs || results[r].f < results[best].f)) best = r;
  }
  if (best == runs) {  // no run ever factorised: keep the hyperparameters
    factorise_or_fall_back(hyper_);
    return;
  }
  report_.optimised = true;
  report_.log_marginal_likelihood = -results[best].f * static_cast<double>(Xs.rows());
  factorise_or_fall_back(gp_hyper::unpack(results[best].theta));
}

void gp::append(const Eigen::Ref<const Eigen::VectorXd>& x, double y) {
  require(x.size() == static_cast<Eigen::Index>(d_), "append: the point has " + std::to_string(x.size()) +
                                                         " coordinates; the GP has dimension " +
                                                         std::to_string(d_));
  require(x.allFinite() && std::isfinite(y), "append: a NaN or infinite coordinate or target");
  const Eigen::Index n = X_.rows();
  X_.conservativeResize(n + 1, Eigen::NoChange);
  X_.row(n) = x.transpose();
  y_.conservativeResize(n + 1);
  y_(n) = y;
  z_.conservativeResize(n + 1);
  z_(n) = (y - y_mean_) / y_std_;
  const Eigen::VectorXd inv_l = (-hyper_.log_lengthscale.array()).exp().matrix();
  const Eigen::VectorXd sx = ((x.array() - 0.5) * inv_l.array()).matrix();
  const auto d = static_cast<Eigen::Index>(d_);
  scaled_t_.conservativeResize(Eigen::NoChange, n + 1);
  scaled_t_.col(n).head(d) = sx;
  scaled_t_(d, n) = 1.0;
  scaled_t_(d + 1, n) = sx.squaredNorm();
  if (constant_) {
    factorise_or_fall_back(hyper_);
    return;
  }

  const double s2 = std::exp(hyper_.log_signal_variance), noise = std::exp(hyper_.log_noise_variance);
  Eigen::VectorXd k = (scaled_t_.topLeftCorner(d, n).colwise() - sx).colwise().squaredNorm().transpose();
  kernel_values(opt_.kernel, s2, k.data(), k.data(), nullptr, static_cast<std::size_t>(n));
  const double kxx = s2 + noise + jitter_;
  const Eigen::VectorXd l = chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solve(k);
  const double d2 = kxx - l.squaredNorm();
  if (!(d2 > 1e-13 * kxx) || !l.allFinite()) {
    factorise_or_fall_back(hyper_);  // numerically singular extension: start again with jitter
    return;
  }
  if (chol_.rows() < n + 1) {
    const Eigen::Index cap = std::max<Eigen::Index>(2 * n, n + 32);
    Eigen::MatrixXd grown(cap, cap);
    grown.topLeftCorner(n, n).triangularView<Eigen::Lower>() = chol_.topLeftCorner(n, n);
    chol_.swap(grown);
  }
  chol_.row(n).head(n) = l.transpose();
  const double diag = std::sqrt(d2);
  chol_(n, n) = diag;
  w_.conservativeResize(n + 1);
  w_(n) = (z_(n) - l.dot(w_.head(n))) / diag;
  alpha_ = chol_.topLeftCorner(n + 1, n + 1).triangularView<Eigen::Lower>().transpose().solve(w_);
}

gp gp::condition_on(const Eigen::Ref<const Eigen::MatrixXd>& pending, const double* fantasy_y) const {
  check_inputs(pending, "the pending matrix");
  gp out = *this;
  Eigen::VectorXd fantasy(pending.rows());
  if (fantasy_y)
    fantasy.setConstant(*fantasy_y);
  else
    predict_mean(pending, fantasy);  // appending at the posterior mean leaves the mean unchanged
  require(fantasy.allFinite(), "condition_on_pending: the fantasy target is NaN or infinite");
  for (Eigen::Index i = 0; i < pending.rows(); ++i)
    out.append(pending.row(i).transpose(), fantasy(i));
  return out;
}

gp gp::condition_on_pending(const Eigen::Ref<const Eigen::MatrixXd>& pending) const {
  return condition_on(pending, nullptr);
}

gp gp::condition_on_pending(const Eigen::Ref<const Eigen::MatrixXd>& pending, double fantasy_y) const {
  return condition_on(pending, &fantasy_y);
}

double gp::log_marginal_likelihood(const gp_hyper& hyper, Eigen::VectorXd* gradient) const {
  require(hyper.log_lengthscale.size() == static_cast<Eigen::Index>(d_),
          "log_marginal_likelihood: the hyperparameters have the wrong dimension");
  lml_workspace ws;
  Eigen::VectorXd g;
  const double lml = lml_eval(opt_.kernel, X_, z_, hyper.pack(), gradient ? &g : nullptr, ws, opt_.parallel);
  if (gradient) *gradient = std::isfinite(lml) ? g : Eigen::VectorXd::Zero(static_cast<Eigen::Index>(d_) + 2);
  return lml;
}

// ---- prediction -----------------------------------------------------------------------------------

namespace {

// Per-thread scratch space of the blocked prediction.
struct predict_workspace {
  Eigen::MatrixXd C;  // b x (d + 2): scaled candidates times -2, |c|^2, 1
  row_matrix Cr;      // b x d scaled candidates (the AVX2 path)
  row_matrix Kb;      // b x n cross-covariance; reused as the n x b solve buffer
  row_matrix T;       // b x (1 + r), or padded to a multiple of 4 columns: gp_sparse's projections of Kb
  Eigen::VectorXd mean, var;
};

// The k largest entries of row[0..n) (k <= kMaxNeighbours), in descending order.
std::size_t top_k(const double* row, std::size_t n, std::size_t k, double* vals, std::size_t* idx) {
  std::size_t cnt = 0;
  const auto insert = [&](double v, std::size_t i) {
    std::size_t p = cnt < k ? cnt++ : k - 1;
    while (p > 0 && vals[p - 1] < v) {
      vals[p] = vals[p - 1];
      idx[p] = idx[p - 1];
      --p;
    }
    vals[p] = v;
    idx[p] = i;
  };
  std::size_t i = 0;
  for (; i < n && cnt < k; ++i)
    insert(row[i], i);
  // Chunks of 8 whose maximum is below the current k-th value are skipped without a branch per entry.
  for (; i + 8 <= n; i += 8) {
    if (!(Eigen::Map<const Eigen::Array<double, 8, 1>>(row + i).maxCoeff() > vals[k - 1])) continue;
    for (std::size_t j = i; j < i + 8; ++j)
      if (row[j] > vals[k - 1]) insert(row[j], j);
  }
  for (; i < n; ++i)
    if (row[i] > vals[k - 1]) insert(row[i], i);
  return cnt;
}

// k_S' (K_SS + noise I)^-1 k_S for the variance bound: k_S = v[0 .. cnt), the strict lower triangle
// of K_SS packed by rows in `pair` (entry (a, e), e < a, at a (a - 1) / 2 + e), `diag` on the
// diagonal. A scalar Cholesky and forward substitution (cnt <= 16: cheaper than a general solver).
// When a pivot is not positive, the nearest point alone: v[0]^2 / diag.
double neighbour_reduction(const double* v, const double* pair, std::size_t cnt, double diag) {
  double L[kMaxNeighbours][kMaxNeighbours];
  double w[kMaxNeighbours];
  double reduction = 0;
  for (std::size_t a = 0; a < cnt; ++a) {
    const double* row = pair + a * (a - 1) / 2;
    for (std::size_t e = 0; e < a; ++e) {
      double x = row[e];
      for (std::size_t f = 0; f < e; ++f)
        x -= L[a][f] * L[e][f];
      L[a][e] = x / L[e][e];
    }
    double pivot = diag;
    double x = v[a];
    for (std::size_t f = 0; f < a; ++f) {
      pivot -= L[a][f] * L[a][f];
      x -= L[a][f] * w[f];
    }
    if (!(pivot > 0)) return v[0] * v[0] / diag;
    L[a][a] = std::sqrt(pivot);
    w[a] = x / L[a][a];
    reduction += w[a] * w[a];
  }
  return reduction;
}

// f(begin, b, ws) over the blocks of m points: contiguous chunks, one workspace each, on TBB's
// threads when `parallel`; block boundaries do not change the values.
template <class Body>
void for_blocks(bool parallel, Eigen::Index m, const Body& body) {
  const Eigen::Index blocks = (m + kBlock - 1) / kBlock;
  const int threads = parallel ? std::max(1, tbb::this_task_arena::max_concurrency()) : 1;
  const Eigen::Index chunks = std::min<Eigen::Index>(blocks, threads);
  const auto chunk = [&](Eigen::Index c) {
    thread_local predict_workspace ws;  // reused across calls: the blocks are large
    const Eigen::Index b0 = blocks * c / chunks, b1 = blocks * (c + 1) / chunks;
    for (Eigen::Index b = b0; b < b1; ++b) {
      const Eigen::Index begin = b * kBlock;
      body(begin, std::min(kBlock, m - begin), ws);
    }
  };
  if (chunks <= 1) {
    if (chunks == 1) chunk(0);
    return;
  }
  tbb::parallel_for(Eigen::Index{0}, chunks, chunk);
}

// The points a cross-covariance is taken against (the training inputs of a gp, or the inducing inputs
// of a gp_sparse) with the kernel and hyperparameters that go with them.
struct cross_source {
  gp_kernel kernel;
  double s2;
  Eigen::VectorXd inv_l;            // 1 / length scales
  const Eigen::MatrixXd& scaled_t;  // (d + 2) x n: scaled inputs, 1, squared norms (gp::scaled_t_'s form)
  bool simd, parallel;
};

cross_source source_of(const gp_options& opt, const gp_hyper& h, const Eigen::MatrixXd& scaled_t) {
  return {opt.kernel,
          std::exp(h.log_signal_variance),
          (-h.log_lengthscale.array()).exp().matrix(),
          scaled_t,
          opt.simd,
          opt.parallel};
}

// body(begin, b, ws) with ws.Kb = K(Xs[begin, begin + b), source points) (b x n, standardised).
template <class Body>
void for_cross_blocks(const cross_source& src, const Eigen::Ref<const Eigen::MatrixXd>& Xs,
                      const Body& body) {
  const Eigen::Index n = src.scaled_t.cols(), d = src.scaled_t.rows() - 2;
  const Eigen::VectorXd& inv_l = src.inv_l;
  const bool simd = src.simd && gp_simd::simd_available() && n > 0 && d <= 64;
  // With AVX2: the training inputs by dimension (then |t|^2), padded to 8 columns, for
  // gp_simd::squared_distances (a 4 x 8 register-blocked product; Eigen's baseline GEMM is slow with
  // an inner dimension of d + 2).
  std::vector<double> by_dim;
  const auto np = static_cast<std::size_t>((n + 7) / 8 * 8);
  if (simd) {
    by_dim.assign(static_cast<std::size_t>(d + 1) * np, 0.0);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < d; ++j)
        by_dim[static_cast<std::size_t>(j) * np + static_cast<std::size_t>(i)] = src.scaled_t(j, i);
      by_dim[static_cast<std::size_t>(d) * np + static_cast<std::size_t>(i)] = src.scaled_t(d + 1, i);
    }
  }
  for_blocks(src.parallel, Xs.rows(), [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
    ws.Kb.resize(b, n);
    if (simd) {
      ws.Cr = scale_inputs(Xs.middleRows(begin, b), inv_l);
      gp_simd::squared_distances(ws.Cr.data(), static_cast<std::size_t>(d), static_cast<std::size_t>(b),
                                 by_dim.data(), static_cast<std::size_t>(d), static_cast<std::size_t>(n), np,
                                 ws.Kb.data(), static_cast<std::size_t>(n));
    } else {
      // Squared distances by one product: [-2c, |c|^2, 1] . [t; 1; |t|^2] = |c - t|^2.
      ws.C.resize(b, d + 2);
      ws.C.leftCols(d) = scale_inputs(Xs.middleRows(begin, b), inv_l);
      ws.C.col(d) = ws.C.leftCols(d).rowwise().squaredNorm();
      ws.C.leftCols(d) *= -2.0;
      ws.C.col(d + 1).setOnes();
      ws.Kb.noalias() = ws.C * src.scaled_t;
    }
    kernel_inplace(src.kernel, src.s2, ws.Kb.data(), static_cast<std::size_t>(b * n), src.simd);
    body(begin, b, ws);
  });
}

}  // namespace

void gp::cross_apply(const Eigen::Ref<const Eigen::MatrixXd>& Xs, const Eigen::VectorXd& v,
                     Eigen::Ref<Eigen::VectorXd> out) const {
  const cross_source src = source_of(opt_, hyper_, scaled_t_);
  for_cross_blocks(src, Xs, [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
    out.segment(begin, b).noalias() = ws.Kb * v;
  });
}

void gp::predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean,
                 Eigen::Ref<Eigen::VectorXd> variance, bool include_noise) const {
  check_inputs(Xs, "the prediction matrix");
  require(mean.size() == Xs.rows() && variance.size() == Xs.rows(), "predict: output size mismatch");
  const Eigen::Index n = X_.rows();
  const double s2 = std::exp(hyper_.log_signal_variance), noise = std::exp(hyper_.log_noise_variance);
  const double add = include_noise ? noise : 0.0;
  const double ystd2 = y_std_ * y_std_;
  if (n == 0 || constant_) {
    mean.setConstant(y_mean_);
    variance.setConstant(ystd2 * ((constant_ ? std::max(s2, 1.0) : s2) + add));
    return;
  }
  const auto L = chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
  const cross_source src = source_of(opt_, hyper_, scaled_t_);
  for_cross_blocks(src, Xs, [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
    ws.mean.noalias() = ws.Kb * alpha_;
    Eigen::Map<Eigen::MatrixXd> V(ws.Kb.data(), n, b);  // Kb' in column-major order
    L.solveInPlace(V);
    ws.var = (s2 - V.colwise().squaredNorm().array()).max(kVarianceFloor).transpose() + add;
    mean.segment(begin, b) = (y_mean_ + y_std_ * ws.mean.array()).matrix();
    variance.segment(begin, b) = ystd2 * ws.var;
  });
  // Never NaN or infinite (a pathological candidate, an overflow): fall back to the prior there.
  for (Eigen::Index i = 0; i < Xs.rows(); ++i) {
    if (!std::isfinite(mean(i))) mean(i) = y_mean_;
    if (!std::isfinite(variance(i)) || variance(i) <= 0) variance(i) = ystd2 * (s2 + add);
  }
}

void gp::predict_mean(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean) const {
  check_inputs(Xs, "the prediction matrix");
  require(mean.size() == Xs.rows(), "predict_mean: output size mismatch");
  if (X_.rows() == 0 || constant_) {
    mean.setConstant(y_mean_);
    return;
  }
  cross_apply(Xs, alpha_, mean);
  for (Eigen::Index i = 0; i < Xs.rows(); ++i)
    mean(i) = std::isfinite(mean(i)) ? y_mean_ + y_std_ * mean(i) : y_mean_;
}

void gp::predict_mean_and_variance_bound(const Eigen::Ref<const Eigen::MatrixXd>& Xs,
                                         Eigen::Ref<Eigen::VectorXd> mean,
                                         Eigen::Ref<Eigen::VectorXd> variance_bound,
                                         std::size_t neighbours) const {
  check_inputs(Xs, "the prediction matrix");
  require(mean.size() == Xs.rows() && variance_bound.size() == Xs.rows(),
          "predict_mean_and_variance_bound: output size mismatch");
  const Eigen::Index n = X_.rows();
  const double s2 = std::exp(hyper_.log_signal_variance), noise = std::exp(hyper_.log_noise_variance);
  const double ystd2 = y_std_ * y_std_;
  if (n == 0 || constant_) {
    mean.setConstant(y_mean_);
    variance_bound.setConstant(ystd2 * (constant_ ? std::max(s2, 1.0) : s2));
    return;
  }
  const std::size_t k = std::clamp<std::size_t>(neighbours, 1, std::min<std::size_t>(kMaxNeighbours, n));
  const double diag = s2 + noise + jitter_;
  const auto dim = static_cast<Eigen::Index>(d_);
  // Rounding in the exact variance is far below this margin; the bound must not undercut it.
  const double margin = 1e-9 * s2;
  const bool simd = opt_.simd && gp_simd::simd_available();
  const cross_source src = source_of(opt_, hyper_, scaled_t_);
  for_cross_blocks(src, Xs, [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
    ws.mean.noalias() = ws.Kb * alpha_;
    ws.var.resize(b);
    std::array<double, kMaxNeighbours> vals{};
    std::array<std::size_t, kMaxNeighbours> idx{};
    std::array<double, kMaxNeighbours*(kMaxNeighbours - 1) / 2> pair{};
    for (Eigen::Index i = 0; i < b; ++i) {
      const std::size_t cnt =
          simd ? gp_simd::top_k(&ws.Kb(i, 0), static_cast<std::size_t>(n), k, vals.data(), idx.data())
               : top_k(&ws.Kb(i, 0), static_cast<std::size_t>(n), k, vals.data(), idx.data());
      // Variance given only those neighbours: s2 - k_S' (K_SS + noise I)^-1 k_S.
      std::size_t p = 0;
      for (std::size_t a = 1; a < cnt; ++a)
        for (std::size_t e = 0; e < a; ++e)
          pair[p++] = (scaled_t_.col(static_cast<Eigen::Index>(idx[a])).head(dim) -
                       scaled_t_.col(static_cast<Eigen::Index>(idx[e])).head(dim))
                          .squaredNorm();
      kernel_values(opt_.kernel, s2, pair.data(), pair.data(), nullptr, p);
      double reduction = neighbour_reduction(vals.data(), pair.data(), cnt, diag);
      if (!std::isfinite(reduction) || reduction < 0) reduction = 0;
      ws.var(i) = std::clamp(s2 - reduction + margin, kVarianceFloor, s2 + margin);
    }
    mean.segment(begin, b) = (y_mean_ + y_std_ * ws.mean.array()).matrix();
    variance_bound.segment(begin, b) = ystd2 * ws.var;
  });
  for (Eigen::Index i = 0; i < Xs.rows(); ++i) {
    if (!std::isfinite(mean(i))) mean(i) = y_mean_;
    if (!std::isfinite(variance_bound(i))) variance_bound(i) = ystd2 * s2;
  }
}

Eigen::MatrixXd gp::posterior_covariance(const Eigen::Ref<const Eigen::MatrixXd>& Xs) const {
  check_inputs(Xs, "the covariance matrix's points");
  const Eigen::Index m = Xs.rows(), n = X_.rows();
  const double s2 = std::exp(hyper_.log_signal_variance);
  const Eigen::VectorXd inv_l = (-hyper_.log_lengthscale.array()).exp().matrix();
  Eigen::MatrixXd cov(m, m);
  training_kernel(opt_.kernel, s2, 0.0, scale_inputs(Xs, inv_l), cov, nullptr, opt_.parallel);  // prior
  if (constant_) cov.diagonal().array() = std::max(s2, 1.0);
  if (n > 0 && !constant_) {
    Eigen::MatrixXd V(n, m);  // L^-1 K(X, Xs)
    const cross_source src = source_of(opt_, hyper_, scaled_t_);
    for_cross_blocks(src, Xs, [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
      V.middleCols(begin, b) = ws.Kb.transpose();
    });
    chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solveInPlace(V);
    cov.selfadjointView<Eigen::Lower>().rankUpdate(V.transpose(), -1.0);
  }
  cov = cov.selfadjointView<Eigen::Lower>();
  cov.diagonal() = cov.diagonal().cwiseMax(kVarianceFloor);
  cov *= y_std_ * y_std_;
  if (!cov.allFinite()) cov = (y_std_ * y_std_ * s2) * Eigen::MatrixXd::Identity(m, m);
  return cov;
}

Eigen::VectorXd gp::sample_posterior(const Eigen::Ref<const Eigen::MatrixXd>& Xs, rng& r,
                                     const gp_sample_options& options) const {
  check_inputs(Xs, "the sample points");
  const Eigen::Index m = Xs.rows(), n = X_.rows(), d = static_cast<Eigen::Index>(d_);
  gp_sample_method method = options.method;
  if (method == gp_sample_method::automatic)
    method = static_cast<std::size_t>(m) <= options.exact_max ? gp_sample_method::exact
                                                              : gp_sample_method::pathwise;
  if (constant_) method = gp_sample_method::marginal;
  const auto normals = [&](Eigen::Index count) {
    Eigen::VectorXd e(count);
    for (Eigen::Index i = 0; i < count; ++i)
      e(i) = r.normal();
    return e;
  };

  if (method == gp_sample_method::exact) {
    const Eigen::VectorXd mean = predict(Xs, false).mean;
    Eigen::MatrixXd cov = posterior_covariance(Xs);
    Eigen::MatrixXd L(m, m);
    const Eigen::VectorXd e = normals(m);
    if (cholesky_with_jitter(cov, m, L, opt_.parallel) >= 0)
      return mean + L.triangularView<Eigen::Lower>() * e;
    return mean + (cov.diagonal().array().sqrt() * e.array()).matrix();  // marginals
  }
  if (method == gp_sample_method::marginal) {
    const gp_prediction p = predict(Xs);
    return p.mean + (p.variance.array().sqrt() * normals(m).array()).matrix();
  }

  // Pathwise: f(x) = g(x) + K(x, X) (K + noise I)^-1 (z - g(X) - e) with g a random-Fourier-feature
  // draw of the prior (spectral density of the kernel: Gaussian for rbf, Student-t with 2 nu degrees
  // of freedom for Matern nu) and e ~ N(0, noise + jitter), all in standardised units.
  const auto F = static_cast<Eigen::Index>(std::max<std::size_t>(options.features, 1));
  const double s2 = std::exp(hyper_.log_signal_variance), noise = std::exp(hyper_.log_noise_variance);
  const int dof = opt_.kernel == gp_kernel::matern52 ? 5 : opt_.kernel == gp_kernel::matern32 ? 3 : 0;
  Eigen::MatrixXd omega(d, F);
  Eigen::VectorXd phase(F);
  for (Eigen::Index f = 0; f < F; ++f) {
    for (Eigen::Index j = 0; j < d; ++j)
      omega(j, f) = r.normal();
    if (dof > 0) {
      double chi2 = 0;
      for (int i = 0; i < dof; ++i)
        chi2 += std::pow(r.normal(), 2);
      omega.col(f) *= std::sqrt(dof / std::max(chi2, 1e-300));
    }
    phase(f) = 6.283185307179586 * r.uniform();
  }
  const Eigen::VectorXd weights = normals(F) * std::sqrt(2.0 * s2 / static_cast<double>(F));
  const Eigen::VectorXd inv_l = (-hyper_.log_lengthscale.array()).exp().matrix();
  const auto prior_draw = [&](const Eigen::Ref<const Eigen::MatrixXd>& P, Eigen::Ref<Eigen::VectorXd> out) {
    for_blocks(opt_.parallel, P.rows(), [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
      ws.C = scale_inputs(P.middleRows(begin, b), inv_l);
      ws.Kb.resize(b, F);
      ws.Kb.noalias() = ws.C * omega;
      ws.Kb.rowwise() += phase.transpose();
      ws.Kb = ws.Kb.array().cos().matrix();
      out.segment(begin, b).noalias() = ws.Kb * weights;
    });
  };
  Eigen::VectorXd g_star(m);
  prior_draw(Xs, g_star);
  if (n == 0) return (y_mean_ + y_std_ * g_star.array()).matrix();
  Eigen::VectorXd resid(n);
  prior_draw(X_, resid);
  resid = z_ - resid - normals(n) * std::sqrt(noise + jitter_);
  const auto L = chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
  L.solveInPlace(resid);
  chol_.topLeftCorner(n, n).transpose().triangularView<Eigen::Upper>().solveInPlace(resid);
  Eigen::VectorXd update(m);
  cross_apply(Xs, resid, update);
  Eigen::VectorXd out = (y_mean_ + y_std_ * (g_star + update).array()).matrix();
  for (Eigen::Index i = 0; i < m; ++i)
    if (!std::isfinite(out(i))) out(i) = y_mean_;
  return out;
}

// ---- sparse approximation ------------------------------------------------------------------------

namespace {

// Jitter on the inducing covariance K_ZZ, relative to s2: it has no noise term and is numerically
// singular for smooth kernels (long length scales); the jitter schedule follows when this is not enough.
constexpr double kInducingJitter = 1e-8;

// k-means++ seeding on the rows of S: the first row uniformly, each next one with probability
// proportional to its squared distance to the nearest chosen row. m distinct rows (m <= rows); when
// every remaining row duplicates a chosen one, the lowest-index unchosen rows. Deterministic for r.
std::vector<std::size_t> kmeans_pp_seeds(const Eigen::MatrixXd& S, std::size_t m, rng& r) {
  const auto n = static_cast<std::size_t>(S.rows());
  std::vector<std::size_t> chosen;
  std::vector<char> taken(n, 0);
  Eigen::VectorXd dist2 = Eigen::VectorXd::Constant(S.rows(), kInf);
  const auto take = [&](std::size_t i) {
    chosen.push_back(i);
    taken[i] = 1;
    dist2 = dist2.cwiseMin((S.rowwise() - S.row(static_cast<Eigen::Index>(i))).rowwise().squaredNorm());
    dist2(static_cast<Eigen::Index>(i)) = 0.0;
  };
  take(static_cast<std::size_t>(r.index(n)));
  while (chosen.size() < m) {
    double total = 0;
    for (std::size_t i = 0; i < n; ++i)
      total += taken[i] ? 0.0 : dist2(static_cast<Eigen::Index>(i));
    std::size_t next = n;
    if (total > 0) {
      const double u = r.uniform() * total;
      double cum = 0;
      for (std::size_t i = 0; i < n && next == n; ++i) {
        if (taken[i] || !(dist2(static_cast<Eigen::Index>(i)) > 0)) continue;
        cum += dist2(static_cast<Eigen::Index>(i));
        if (cum > u) next = i;
      }
      if (next == n)  // rounding left u at the very end: the last eligible row
        for (std::size_t i = n; i-- > 0 && next == n;)
          if (!taken[i] && dist2(static_cast<Eigen::Index>(i)) > 0) next = i;
    }
    if (next == n)  // only duplicates of chosen rows remain
      for (std::size_t i = 0; i < n && next == n; ++i)
        if (!taken[i]) next = i;
    take(next);
  }
  return chosen;
}

// The columns of `t` (a (d + 2) x n scaled-input matrix) at idx.
Eigen::MatrixXd columns_at(const Eigen::MatrixXd& t, const std::vector<std::size_t>& idx) {
  Eigen::MatrixXd out(t.rows(), static_cast<Eigen::Index>(idx.size()));
  for (std::size_t i = 0; i < idx.size(); ++i)
    out.col(static_cast<Eigen::Index>(i)) = t.col(static_cast<Eigen::Index>(idx[i]));
  return out;
}

// The r directions (columns, best first) of the m x m matrix G that keep the most of |G' k|^2 summed
// over the columns k of Kzx: the top eigenvectors of G' Kzx Kzx' G, applied to G.
Eigen::MatrixXd principal_directions(const Eigen::MatrixXd& G, const Eigen::MatrixXd& Kzx, Eigen::Index r) {
  Eigen::MatrixXd moment = Eigen::MatrixXd::Zero(Kzx.rows(), Kzx.rows());
  moment.selfadjointView<Eigen::Lower>().rankUpdate(Kzx);
  moment = moment.selfadjointView<Eigen::Lower>();
  const Eigen::MatrixXd C = G.transpose() * moment * G;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(C);  // ascending eigenvalues
  return G * eig.eigenvectors().rightCols(r).rowwise().reverse();
}

}  // namespace

gp_sparse gp::sparse_approximation(const gp_sparse_options& options) const {
  require(options.inducing_points >= 1, "sparse_approximation: inducing_points must be at least 1");
  gp_sparse out;
  out.d_ = d_;
  out.opt_ = opt_;
  out.hyper_ = hyper_;
  out.y_mean_ = y_mean_;
  out.y_std_ = y_std_;
  const Eigen::Index n = X_.rows(), d = static_cast<Eigen::Index>(d_);
  const double s2 = std::exp(hyper_.log_signal_variance);
  out.constant_variance_ = constant_ ? std::max(s2, 1.0) : s2;
  if (n == 0 || constant_) return out;  // predicts as this GP does: a constant
  out.constant_ = false;

  // 1. Inducing points: all, or k-means++ seeds in the scaled inputs.
  const auto m =
      static_cast<Eigen::Index>(std::min<std::size_t>(options.inducing_points, static_cast<std::size_t>(n)));
  if (m == n) {
    out.inducing_.resize(static_cast<std::size_t>(n));
    std::iota(out.inducing_.begin(), out.inducing_.end(), std::size_t{0});
  } else {
    rng r(options.seed);
    out.inducing_ = kmeans_pp_seeds(scaled_t_.topRows(d).transpose(), static_cast<std::size_t>(m), r);
  }
  out.scaled_t_ = columns_at(scaled_t_, out.inducing_);

  // 2. L = chol(K_ZZ + jitter) and K_ZX (m x n).
  Eigen::MatrixXd Kzz(m, m), L(m, m);
  training_kernel(opt_.kernel, s2, kInducingJitter * s2, out.scaled_t_.topRows(d).transpose(), Kzz, nullptr,
                  opt_.parallel);
  if (cholesky_with_jitter(Kzz, m, L, opt_.parallel) < 0) {
    out.inducing_.clear();
    return out;  // nothing factorised: the prior (the acquisition's screening then falls back to exact)
  }
  const auto Lz = L.triangularView<Eigen::Lower>();
  Eigen::MatrixXd Kzx(m, n);
  Eigen::MatrixXd Xz(m, d);
  for (Eigen::Index i = 0; i < m; ++i)
    Xz.row(i) = X_.row(static_cast<Eigen::Index>(out.inducing_[static_cast<std::size_t>(i)]));
  for_cross_blocks(
      source_of(opt_, hyper_, scaled_t_), Xz,
      [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) { Kzx.middleRows(begin, b) = ws.Kb; });

  // 3. A = I + V V' with V = L^-1 K_ZX / sqrt(s), s = noise + jitter: A = U diag(a) U'. Then
  //    (K_ZZ + K_ZX K_XZ / s)^-1 = L^-T A^-1 L^-1, so the mean's weights are L^-T A^-1 V z / sqrt(s) and
  //    the variance reduction K_ZZ^-1 - L^-T A^-1 L^-1 = G G' with G = L^-T U diag(sqrt(1 - 1/a)).
  const double noise = std::exp(hyper_.log_noise_variance) + jitter_;
  Eigen::MatrixXd V = Kzx / std::sqrt(noise);
  Lz.solveInPlace(V);
  Eigen::MatrixXd A = Eigen::MatrixXd::Identity(m, m);
  A.selfadjointView<Eigen::Lower>().rankUpdate(V);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(A);
  const Eigen::MatrixXd& U = eig.eigenvectors();
  const Eigen::ArrayXd a = eig.eigenvalues().array().max(1.0);  // A >= I; rounding must not undercut it
  Eigen::VectorXd beta = U * ((U.transpose() * (V * z_)).array() / a).matrix() / std::sqrt(noise);
  L.transpose().triangularView<Eigen::Upper>().solveInPlace(beta);
  Eigen::MatrixXd G = U * (1.0 - 1.0 / a).sqrt().matrix().asDiagonal();
  L.transpose().triangularView<Eigen::Upper>().solveInPlace(G);

  // 4. The variance's directions: all of G, or the rank-r projection fitted on the training inputs.
  const Eigen::Index r = std::min<Eigen::Index>(static_cast<Eigen::Index>(options.variance_rank), m);
  out.weights_.resize(m, 1 + r);
  out.weights_.col(0) = beta;
  if (r == m)
    out.weights_.rightCols(r) = G;
  else if (r > 0)
    out.weights_.rightCols(r) = principal_directions(G, Kzx, r);
  if (!out.weights_.allFinite()) {
    out.inducing_.clear();
    out.weights_.resize(0, 0);
    return out;
  }
  // The AVX2 path's copy: row-major, the columns padded with zeros to a multiple of 4.
  const Eigen::Index c = (1 + r + 3) / 4 * 4;
  out.weights_padded_.assign(static_cast<std::size_t>(m * c), 0.0);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j <= r; ++j)
      out.weights_padded_[static_cast<std::size_t>(i * c + j)] = out.weights_(i, j);
  return out;
}

bool gp_sparse::valid() const noexcept {
  return constant_ || weights_.size() > 0;
}

void gp_sparse::predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, Eigen::Ref<Eigen::VectorXd> mean,
                        Eigen::Ref<Eigen::VectorXd> variance) const {
  require(Xs.cols() == static_cast<Eigen::Index>(d_),
          "gp_sparse::predict: the points have " + std::to_string(Xs.cols()) +
              " columns; the GP has dimension " + std::to_string(d_));
  require(Xs.allFinite(), "gp_sparse::predict: a NaN or infinite coordinate");
  require(mean.size() == Xs.rows() && variance.size() == Xs.rows(),
          "gp_sparse::predict: output size mismatch");
  const double s2 = std::exp(hyper_.log_signal_variance), ystd2 = y_std_ * y_std_;
  if (constant_ || weights_.size() == 0) {
    mean.setConstant(y_mean_);
    variance.setConstant(ystd2 * (constant_ ? constant_variance_ : s2));
    return;
  }
  const Eigen::Index r = weights_.cols() - 1, m = weights_.rows();
  const bool simd = opt_.simd && gp_simd::simd_available();
  const auto c = static_cast<Eigen::Index>(weights_padded_.size()) / std::max<Eigen::Index>(m, 1);
  for_cross_blocks(
      source_of(opt_, hyper_, scaled_t_), Xs, [&](Eigen::Index begin, Eigen::Index b, predict_workspace& ws) {
        if (simd) {
          ws.T.resize(b, c);
          gp_simd::project_rows(ws.Kb.data(), static_cast<std::size_t>(m), static_cast<std::size_t>(b),
                                static_cast<std::size_t>(m), weights_padded_.data(),
                                static_cast<std::size_t>(c), ws.T.data());
        } else {
          ws.T.noalias() = ws.Kb * weights_;
        }
        mean.segment(begin, b) = (y_mean_ + y_std_ * ws.T.col(0).array()).matrix();
        variance.segment(begin, b) =
            ystd2 *
            (s2 - ws.T.middleCols(1, r).rowwise().squaredNorm().array()).max(kVarianceFloor).min(s2).matrix();
      });
  for (Eigen::Index i = 0; i < Xs.rows(); ++i) {
    if (!std::isfinite(mean(i))) mean(i) = y_mean_;
    if (!std::isfinite(variance(i))) variance(i) = ystd2 * s2;
  }
}

gp_prediction gp::predict(const Eigen::Ref<const Eigen::MatrixXd>& Xs, bool with_variance,
                          bool include_noise) const {
  gp_prediction p;
  p.mean.resize(Xs.rows());
  if (with_variance) {
    p.variance.resize(Xs.rows());
    predict(Xs, p.mean, p.variance, include_noise);
  } else {
    predict_mean(Xs, p.mean);
  }
  return p;
}

}  // namespace kf
