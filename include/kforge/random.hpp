// kf::rng: the one source of randomness in kforge.
//
// Contract: every stochastic component takes an rng (or a seed) explicitly; the same seed gives the
// same sequence on every platform (xoshiro256** seeded through splitmix64, and portable helpers
// instead of the implementation-defined std:: distributions).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

namespace kf {

__extension__ typedef unsigned __int128 uint128_t;  // GCC/Clang builtin; __extension__ keeps -Wpedantic quiet

class rng {
 public:
  using result_type = std::uint64_t;
  explicit rng(std::uint64_t seed = 0) noexcept { reseed(seed); }

  void reseed(std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (auto& s : s_)
      s = splitmix64(x);
  }

  /// A child generator whose stream is independent of this one's (for sub-components).
  rng split() noexcept { return rng((*this)() ^ 0x6a09e667f3bcc909ULL); }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  result_type operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform integer in [0, n); n > 0. Lemire's multiply-shift with rejection (unbiased).
  std::uint64_t index(std::uint64_t n) noexcept {
    uint128_t m = static_cast<uint128_t>((*this)()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<uint128_t>((*this)()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

  /// True with probability p.
  bool bernoulli(double p) noexcept { return uniform() < p; }

  /// Standard normal (Box-Muller; one value per call, the pair's second is discarded for simplicity).
  double normal() noexcept {
    double u1 = uniform();
    while (u1 <= 0.0)
      u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  /// Fisher-Yates shuffle.
  template <class T>
  void shuffle(std::span<T> xs) noexcept {
    for (std::size_t i = xs.size(); i > 1; --i)
      std::swap(xs[i - 1], xs[index(i)]);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t s_[4];
};

}  // namespace kf
