// kf::transfer_data and kf::transfer_prior: see include/kforge/transfer.hpp.
#include "kforge/transfer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kforge/error.hpp"
#include "kforge/recorded.hpp"

namespace kf {

namespace {

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

// The standard normal quantile of p in (0, 1): Newton's method on the cdf from 0, kept inside a
// bracket that halves when a step would leave it (enough for p in [1e-12, 1 - 1e-12]).
double normal_quantile(double p) {
  double lo = -8.0, hi = 8.0, x = 0.0;
  for (int it = 0; it < 100; ++it) {
    const double f = normal_cdf(x) - p;
    if (std::abs(f) < 1e-14) break;
    (f > 0 ? hi : lo) = x;
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.141592653589793);
    double next = x - f / pdf;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (std::abs(next - x) < 1e-13) break;
    x = next;
  }
  return x;
}

}  // namespace

transfer_data load_transfer(const std::vector<std::string>& files, const search_space& space) {
  transfer_data out;
  for (const auto& file : files) {
    const auto rec = load_recorded_cached(file);
    const auto bound = bind_records(*rec, space);
    transfer_source src;
    src.file = file;
    src.device = rec->device_name;
    src.unmatched = bound.unmatched;
    std::size_t successes = 0;
    for (const auto& [cfg, index] : bound.entries) {
      if (!space.is_valid(cfg)) {
        ++src.unmatched;
        continue;
      }
      const trial& t = rec->records[index].result;
      const bool ok = t.ok() && std::isfinite(t.time_ms) && t.time_ms > 0;
      successes += ok ? 1 : 0;
      src.configs.push_back(cfg);
      src.time_ms.push_back(ok ? t.time_ms : std::numeric_limits<double>::infinity());
      src.metrics.push_back(t.metrics);
    }
    if (successes == 0)
      throw error("transfer recording " + file + " holds no successful configuration of this space (" +
                  std::to_string(bound.entries.size()) + " records match its parameters, " +
                  std::to_string(src.unmatched) + " do not" +
                  (bound.first_unmatched.empty() ? "" : "; the first: " + bound.first_unmatched) + ")");
    out.sources.push_back(std::move(src));
  }
  return out;
}

transfer_prior::transfer_prior(const transfer_data& data) {
  std::map<config, std::pair<double, int>> sum;  // score sum, sources
  double spread_sum = 0;
  int spreads = 0;
  for (const auto& src : data.sources) {
    // Successes by time (ties: the lower configuration first, as configs are sorted); failures last.
    std::vector<std::size_t> order(src.configs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return src.time_ms[a] < src.time_ms[b]; });
    std::size_t ok = 0;
    double mean = 0, m2 = 0;
    for (const auto i : order) {
      if (!std::isfinite(src.time_ms[i])) continue;
      ++ok;
      const double l = std::log(src.time_ms[i]), delta = l - mean;
      mean += delta / static_cast<double>(ok);
      m2 += delta * (l - mean);
    }
    if (ok == 0) continue;
    if (ok > 1) {
      spread_sum += std::sqrt(m2 / static_cast<double>(ok));
      ++spreads;
    }
    const double n = static_cast<double>(ok);
    const double failed = normal_quantile(1.0 - 0.5 / (n + 1.0));  // above every success
    std::size_t rank = 0;
    for (const auto i : order) {
      const bool success = std::isfinite(src.time_ms[i]);
      const double s = success ? normal_quantile((static_cast<double>(rank++) + 0.5) / n) : failed;
      auto& [total, count] = sum[src.configs[i]];
      total += s;
      ++count;
    }
  }
  for (const auto& [cfg, sc] : sum)
    score_.emplace(cfg, sc.first / sc.second);
  ranked_.reserve(score_.size());
  for (const auto& [cfg, s] : score_)
    ranked_.push_back(cfg);
  std::stable_sort(ranked_.begin(), ranked_.end(),
                   [&](const config& a, const config& b) { return score_.at(a) < score_.at(b); });
  if (spreads > 0) spread_ = spread_sum / spreads;
}

std::optional<double> transfer_prior::score(const config& c) const {
  const auto it = score_.find(c);
  if (it == score_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kf
