// The AVX2 + FMA loops of kf::gp (see gp_simd.hpp for why they stand apart). Every function that uses
// 256-bit instructions carries the target attribute; nothing here runs unless simd_available().
#include "gp_simd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#define KF_SIMD_X86 1
#endif

namespace kf::gp_simd {

bool simd_available() noexcept {
#if defined(KF_SIMD_X86)
  static const bool available = [] {
    if (std::getenv("KFORGE_GP_NO_SIMD")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return available;
#else
  return false;
#endif
}

#if defined(KF_SIMD_X86)
namespace {

#define KF_AVX2 __attribute__((target("avx2,fma")))

KF_AVX2 inline __m256d splat(double v) {
  return _mm256_set1_pd(v);
}

// exp(-g) for g >= 0, exactly 0 where g > 700 (and where g is NaN). x = -g = m ln2 + r with |r| <= ln2 / 2
// (Cody-Waite: m ln2_hi is exact for |m| < 2^11), e^r by its Taylor polynomial of degree 12
// (truncation below 2e-16 relative) in Estrin's scheme (a short dependent chain), 2^m through the
// exponent bits. Relative error below 4 ulps.
KF_AVX2 inline __m256d exp_negative(__m256d g) {
  const __m256d x = _mm256_max_pd(_mm256_sub_pd(_mm256_setzero_pd(), g), splat(-700.0));
  const __m256d m = _mm256_round_pd(_mm256_mul_pd(x, splat(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(m, splat(6.93145751953125e-1), x);
  r = _mm256_fnmadd_pd(m, splat(1.42860682030941723212e-6), r);
  const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
  const __m256d p01 = _mm256_fmadd_pd(r, splat(1.0), splat(1.0));
  const __m256d p23 = _mm256_fmadd_pd(r, splat(1.0 / 6), splat(0.5));
  const __m256d p45 = _mm256_fmadd_pd(r, splat(1.0 / 120), splat(1.0 / 24));
  const __m256d p67 = _mm256_fmadd_pd(r, splat(1.0 / 5040), splat(1.0 / 720));
  const __m256d p89 = _mm256_fmadd_pd(r, splat(1.0 / 362880), splat(1.0 / 40320));
  const __m256d pab = _mm256_fmadd_pd(r, splat(1.0 / 39916800), splat(1.0 / 3628800));
  const __m256d p0_3 = _mm256_fmadd_pd(r2, p23, p01);
  const __m256d p4_7 = _mm256_fmadd_pd(r2, p67, p45);
  const __m256d p8_b = _mm256_fmadd_pd(r2, pab, p89);
  const __m256d p8_c = _mm256_fmadd_pd(r4, splat(1.0 / 479001600), p8_b);
  const __m256d p0_7 = _mm256_fmadd_pd(r4, p4_7, p0_3);
  const __m256d p = _mm256_fmadd_pd(r8, p8_c, p0_7);
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(m)), _mm256_set1_epi64x(1023)), 52);
  const __m256d v = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
  return _mm256_and_pd(v, _mm256_cmp_pd(g, splat(700.0), _CMP_LE_OQ));
}

template <kernel_kind kind>
KF_AVX2 inline __m256d kernel4(__m256d q, __m256d s2) {
  q = _mm256_max_pd(_mm256_setzero_pd(), q);  // rounding can make q slightly negative; NaN stays NaN
  if constexpr (kind == kernel_kind::rbf) {
    return _mm256_mul_pd(s2, exp_negative(_mm256_mul_pd(q, splat(0.5))));
  } else if constexpr (kind == kernel_kind::matern32) {
    const __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(q, splat(3.0)));
    return _mm256_mul_pd(_mm256_mul_pd(s2, _mm256_add_pd(splat(1.0), r)), exp_negative(r));
  } else {
    const __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(q, splat(5.0)));
    const __m256d poly = _mm256_fmadd_pd(_mm256_mul_pd(r, r), splat(1.0 / 3.0), _mm256_add_pd(splat(1.0), r));
    return _mm256_mul_pd(_mm256_mul_pd(s2, poly), exp_negative(r));
  }
}

template <kernel_kind kind>
KF_AVX2 void kernel_loop(double s2, double* q, std::size_t n) {
  const __m256d vs2 = splat(s2);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a = _mm256_loadu_pd(q + i), b = _mm256_loadu_pd(q + i + 4);
    _mm256_storeu_pd(q + i, kernel4<kind>(a, vs2));
    _mm256_storeu_pd(q + i + 4, kernel4<kind>(b, vs2));
  }
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(q + i, kernel4<kind>(_mm256_loadu_pd(q + i), vs2));
  if (i < n) {  // the tail through a padded vector, so that it takes the same path
    alignas(32) double pad[4] = {0, 0, 0, 0};
    for (std::size_t j = i; j < n; ++j)
      pad[j - i] = q[j];
    _mm256_store_pd(pad, kernel4<kind>(_mm256_load_pd(pad), vs2));
    for (std::size_t j = i; j < n; ++j)
      q[j] = pad[j - i];
  }
}

// Rows r0 .. r0 + R of the distance block (R <= 4), every 8-column group of t, 4 x 8 accumulators.
template <std::size_t R>
KF_AVX2 void distance_rows(const double* c, std::size_t ldc, const double* t, std::size_t d, std::size_t n,
                           std::size_t n_padded, double* out, std::size_t ld) {
  double cc[R];  // |c_r|^2
  for (std::size_t r = 0; r < R; ++r) {
    cc[r] = 0;
    for (std::size_t j = 0; j < d; ++j)
      cc[r] += c[r * ldc + j] * c[r * ldc + j];
  }
  const double* tn = t + d * n_padded;  // |t_i|^2
  double m2c[R][64];                    // -2 c_rj (d <= 64: the caller's condition)
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < d; ++j)
      m2c[r][j] = -2.0 * c[r * ldc + j];
  // The loops over r are unrolled so that the accumulators stay in registers (without the pragmas GCC
  // -O2 kept them on the stack, which made this loop store-bound).
  for (std::size_t i = 0; i < n; i += 8) {
    __m256d acc[R][2];
    const __m256d n0 = _mm256_loadu_pd(tn + i), n1 = _mm256_loadu_pd(tn + i + 4);
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r) {
      acc[r][0] = _mm256_add_pd(n0, splat(cc[r]));
      acc[r][1] = _mm256_add_pd(n1, splat(cc[r]));
    }
    for (std::size_t j = 0; j < d; ++j) {
      const __m256d t0 = _mm256_loadu_pd(t + j * n_padded + i),
                    t1 = _mm256_loadu_pd(t + j * n_padded + i + 4);
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) {
        const __m256d cj = splat(m2c[r][j]);
        acc[r][0] = _mm256_fmadd_pd(t0, cj, acc[r][0]);
        acc[r][1] = _mm256_fmadd_pd(t1, cj, acc[r][1]);
      }
    }
    if (i + 8 <= n) {
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) {
        _mm256_storeu_pd(out + r * ld + i, acc[r][0]);
        _mm256_storeu_pd(out + r * ld + i + 4, acc[r][1]);
      }
    } else {  // the last group: only the first n - i columns belong to out
      alignas(32) double tail[8];
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) {
        _mm256_store_pd(tail, acc[r][0]);
        _mm256_store_pd(tail + 4, acc[r][1]);
        for (std::size_t k = 0; k < n - i; ++k)
          out[r * ld + i + k] = tail[k];
      }
    }
  }
}

// Rows r0 .. r0 + R (R <= 4) of out = K W, columns j0 .. j0 + 4 NV (NV <= 2).
template <std::size_t R, std::size_t NV>
KF_AVX2 void project_block(const double* K, std::size_t ldk, std::size_t m, const double* W, std::size_t c,
                           double* out) {
  // The loops over r and v are unrolled so that the accumulators stay in registers (see distance_rows).
  __m256d acc[R][NV];
#pragma GCC unroll 4
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (std::size_t v = 0; v < NV; ++v)
      acc[r][v] = _mm256_setzero_pd();
  for (std::size_t i = 0; i < m; ++i) {
    __m256d w[NV];
#pragma GCC unroll 2
    for (std::size_t v = 0; v < NV; ++v)
      w[v] = _mm256_loadu_pd(W + i * c + 4 * v);
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r) {
      const __m256d k = splat(K[r * ldk + i]);
#pragma GCC unroll 2
      for (std::size_t v = 0; v < NV; ++v)
        acc[r][v] = _mm256_fmadd_pd(k, w[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (std::size_t v = 0; v < NV; ++v)
      _mm256_storeu_pd(out + r * c + 4 * v, acc[r][v]);
}

template <std::size_t R>
KF_AVX2 void project_row_group(const double* K, std::size_t ldk, std::size_t m, const double* W,
                               std::size_t c, double* out) {
  std::size_t j = 0;
  for (; j + 8 <= c; j += 8)
    project_block<R, 2>(K, ldk, m, W + j, c, out + j);
  if (j < c) project_block<R, 1>(K, ldk, m, W + j, c, out + j);
}

// Two passes: (1) the maxima of k disjoint parts of the row, branch-free; their minimum is at most the
// k-th largest value (k distinct entries reach it), so (2) only entries at or above it can belong to
// the result, and in a kernel row they are few. The result equals a scalar scan's (by value, then by
// index).
KF_AVX2 std::size_t top_k_avx2(const double* row, std::size_t n, std::size_t k, double* vals,
                               std::size_t* idx) {
  std::size_t cnt = 0;
  const auto insert = [&](double v, std::size_t i) {  // descending by value; equal values keep index order
    if (cnt == k && !(v > vals[k - 1])) return;
    std::size_t p = cnt < k ? cnt++ : k - 1;
    while (p > 0 && vals[p - 1] < v) {
      vals[p] = vals[p - 1];
      idx[p] = idx[p - 1];
      --p;
    }
    vals[p] = v;
    idx[p] = i;
  };
  if (n < 16 * k) {  // short rows: one insertion scan
    for (std::size_t i = 0; i < n; ++i)
      insert(row[i], i);
    return cnt;
  }
  double threshold = INFINITY;
  const std::size_t part = n / k;
  for (std::size_t q = 0; q < k; ++q) {
    const std::size_t begin = q * part, end = q + 1 == k ? n : begin + part;
    __m256d m = splat(-INFINITY);
    std::size_t i = begin;
    for (; i + 4 <= end; i += 4)
      m = _mm256_max_pd(m, _mm256_loadu_pd(row + i));
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, m);
    double part_max = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
    for (; i < end; ++i)
      part_max = std::max(part_max, row[i]);
    threshold = std::min(threshold, part_max);
  }
  // Every entry >= threshold, in index order (NaN never passes).
  const __m256d t = splat(threshold);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int hit = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(row + i), t, _CMP_GE_OQ)) |
                    (_mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(row + i + 4), t, _CMP_GE_OQ)) << 4);
    for (unsigned mask = static_cast<unsigned>(hit); mask; mask &= mask - 1) {
      const std::size_t j = i + static_cast<std::size_t>(__builtin_ctz(mask));
      insert(row[j], j);
    }
  }
  for (; i < n; ++i)
    if (row[i] >= threshold) insert(row[i], i);
  return cnt;
}

}  // namespace

void kernel_inplace(kernel_kind kind, double s2, double* q, std::size_t n) noexcept {
  switch (kind) {
    case kernel_kind::rbf:
      kernel_loop<kernel_kind::rbf>(s2, q, n);
      return;
    case kernel_kind::matern32:
      kernel_loop<kernel_kind::matern32>(s2, q, n);
      return;
    case kernel_kind::matern52:
      kernel_loop<kernel_kind::matern52>(s2, q, n);
      return;
  }
}

void squared_distances(const double* c, std::size_t ldc, std::size_t b, const double* t, std::size_t d,
                       std::size_t n, std::size_t n_padded, double* out, std::size_t ld) noexcept {
  std::size_t r = 0;
  for (; r + 4 <= b; r += 4)
    distance_rows<4>(c + r * ldc, ldc, t, d, n, n_padded, out + r * ld, ld);
  for (; r < b; ++r)
    distance_rows<1>(c + r * ldc, ldc, t, d, n, n_padded, out + r * ld, ld);
}

void project_rows(const double* K, std::size_t ldk, std::size_t b, std::size_t m, const double* W,
                  std::size_t c, double* out) noexcept {
  std::size_t r = 0;
  for (; r + 4 <= b; r += 4)
    project_row_group<4>(K + r * ldk, ldk, m, W, c, out + r * c);
  for (; r < b; ++r)
    project_row_group<1>(K + r * ldk, ldk, m, W, c, out + r * c);
}

std::size_t top_k(const double* row, std::size_t n, std::size_t k, double* vals, std::size_t* idx) noexcept {
  if (k == 0) return 0;
  return top_k_avx2(row, n, k > 16 ? 16 : k, vals, idx);
}

#else

void squared_distances(const double*, std::size_t, std::size_t, const double*, std::size_t, std::size_t,
                       std::size_t, double*, std::size_t) noexcept {}
void kernel_inplace(kernel_kind, double, double*, std::size_t) noexcept {}
void project_rows(const double*, std::size_t, std::size_t, std::size_t, const double*, std::size_t,
                  double*) noexcept {}
std::size_t top_k(const double*, std::size_t, std::size_t, double*, std::size_t*) noexcept {
  return 0;
}

#endif

}  // namespace kf::gp_simd
