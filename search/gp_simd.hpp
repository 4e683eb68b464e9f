// Internal to kf::gp (search/gp.cpp): the hot loops of predictions in AVX2 + FMA, chosen at run time.
// The binary stays baseline x86-64: only the functions of search/gp_simd.cpp carry the avx2/fma
// target attribute, they use no Eigen (whose inline templates would otherwise be emitted for AVX2
// and could be picked by the linker for baseline callers), and gp.cpp calls them only after
// simd_available() said yes.
#pragma once

#include <cstddef>

namespace kf::gp_simd {

enum class kernel_kind { matern52, matern32, rbf };

/// True when the CPU runs AVX2 and FMA (checked once) and KFORGE_GP_NO_SIMD is not set in the
/// environment.
bool simd_available() noexcept;

/// q[i] <- s2 * kernel(q[i]) for squared scaled distances q (negative rounding residue counts as 0,
/// NaN stays NaN, q beyond the exponent's range gives 0). Every element takes the same path whatever its
/// position (the tail through a padded vector), so a value does not depend on where it sits. Relative
/// error a few ulps. Only call when simd_available().
void kernel_inplace(kernel_kind kind, double s2, double* q, std::size_t n) noexcept;

/// Squared distances of b points to n points: out[r * ld + i] = |c_r|^2 + |t_i|^2 - 2 c_r . t_i (the
/// form of gp.cpp's product, so that a small negative residue is possible), for c b rows of d
/// coordinates (row-major, leading dimension ldc) and t stored by dimension: t[j * n_padded + i] for
/// j < d, then |t_i|^2 at t[d * n_padded + i]; n_padded is n rounded up to a multiple of 8 (padding
/// entries are read, never written to out), d <= 64. Blocks of 4 x 8 in registers. Only call when
/// simd_available().
void squared_distances(const double* c, std::size_t ldc, std::size_t b, const double* t, std::size_t d,
                       std::size_t n, std::size_t n_padded, double* out, std::size_t ld) noexcept;

/// out = K W for K b x m (row-major, leading dimension ldk) and W m x c (row-major, c a multiple of 4):
/// out[r * c + j] = sum_i K[r * ldk + i] W[i * c + j], summed in order of i (so a row's result does
/// not depend on b or on the other rows). Blocks of 4 rows x 8 columns in registers. Only call when
/// simd_available().
void project_rows(const double* K, std::size_t ldk, std::size_t b, std::size_t m, const double* W,
                  std::size_t c, double* out) noexcept;

/// The k largest entries of row[0 .. n) (1 <= k <= 16) in descending order, into vals and idx; ties go
/// to the lower index. Returns min(k, n). The same result as a scalar scan. Only call when
/// simd_available().
std::size_t top_k(const double* row, std::size_t n, std::size_t k, double* vals, std::size_t* idx) noexcept;

}  // namespace kf::gp_simd
