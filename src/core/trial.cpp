#include "kforge/trial.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace kf {

namespace {
constexpr std::array<std::string_view, status_count> status_names = {
    "ok", "invalid", "compile_failed", "launch_failed", "wrong_result", "timeout", "crashed"};
}

std::string_view to_string(status s) noexcept {
  return status_names[static_cast<std::size_t>(s)];
}

std::optional<status> status_from_string(std::string_view s) noexcept {
  for (std::size_t i = 0; i < status_names.size(); ++i)
    if (status_names[i] == s) return static_cast<status>(i);
  return std::nullopt;
}

std::optional<double> trial::metric(std::string_view name) const {
  auto it = metrics.find(name);
  if (it == metrics.end()) return std::nullopt;
  return it->second;
}

namespace {
// numpy.percentile with linear interpolation on sorted data.
double percentile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return trial::nan;
  const double pos = q * static_cast<double>(s.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}
}  // namespace

summary_stats summarize(std::vector<double> xs) {
  std::erase_if(xs, [](double x) { return std::isnan(x); });
  summary_stats r;
  if (xs.empty()) return r;
  std::sort(xs.begin(), xs.end());
  r.median = percentile_sorted(xs, 0.5);
  r.iqr = percentile_sorted(xs, 0.75) - percentile_sorted(xs, 0.25);
  r.min = xs.front();
  r.mean = std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
  return r;
}

}  // namespace kf
