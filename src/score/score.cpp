#include "kforge/score.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <numeric>

#include "kforge/error.hpp"

namespace kf {

namespace {
// numpy.median of a copy.
double median_of(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Python's round(): half to even.
double round_half_even(double x) {
  return std::nearbyint(x);
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? std::nan("") : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
}  // namespace

space_statistics::space_statistics(const recorded_file& f) {
  std::fesetround(FE_TONEAREST);
  size_ = f.records.size();
  std::vector<double> totals, valid_totals, invalid_totals;
  for (const auto& r : f.records) {
    const double total = r.result.cost.total();
    totals.push_back(total);
    if (r.result.ok() && std::isfinite(r.result.time_ms)) {
      dist_.push_back(r.result.time_ms);
      valid_totals.push_back(total);
    } else {
      invalid_totals.push_back(total);
    }
  }
  if (dist_.empty()) throw error(f.path + ": no correct configuration recorded; the space cannot be scored");
  std::sort(dist_.begin(), dist_.end());
  median_ = median_of(dist_);
  total_time_median_ = median_of(totals);
  const double frac_invalid = static_cast<double>(invalid_totals.size()) / static_cast<double>(size_);
  time_per_feval_ = invalid_totals.empty() ? mean_of(totals)
                                           : mean_of(valid_totals) + frac_invalid * mean_of(invalid_totals);
  if (!(time_per_feval_ > 0) || !(total_time_median_ > 0))
    throw error(f.path +
                ": the recording has no evaluation times (compile/benchmark/framework); the score's time "
                "axis needs them");
}

space_statistics::cutoff space_statistics::cutoff_point(double p) const {
  const double target = optimum() + (median_ - optimum()) * (1 - p);
  const std::size_t n = dist_.size();
  std::size_t i = 0;
  // First index of the descending distribution whose value is <= target.
  for (std::size_t k = 0; k < n; ++k) {
    if (dist_[n - 1 - k] <= target) {
      i = k;
      break;
    }
  }
  const auto fevals =
      static_cast<std::size_t>(std::ceil(static_cast<double>(i) / static_cast<double>(n + 1 - i)));
  return {target, fevals, static_cast<double>(fevals) * total_time_median_};
}

double space_statistics::random_baseline(double t) const {
  const double m = std::max(round_half_even(std::max(t / time_per_feval_, 1.0)), 1.0);
  const double n = static_cast<double>(dist_.size());
  double idx = round_half_even(m * (n + 1) / (m + 1));
  idx = std::min(n - 1, idx);
  // Index into the descending distribution.
  return dist_[dist_.size() - 1 - static_cast<std::size_t>(idx)];
}

std::size_t space_statistics::index_of(double v) const {
  return static_cast<std::size_t>(std::lower_bound(dist_.begin(), dist_.end(), v) - dist_.begin());
}

std::vector<double> score_time_range(const space_statistics& st, const score_settings& s) {
  const double t0 = st.cutoff_point(s.cutoff_start).time_s;
  const double t1 = st.cutoff_point(s.cutoff_end).time_s;
  std::vector<double> r(s.resolution);
  for (std::size_t i = 0; i < s.resolution; ++i)
    r[i] = s.resolution == 1
               ? t0
               : t0 + (t1 - t0) * static_cast<double>(i) / static_cast<double>(s.resolution - 1);
  return r;
}

std::vector<double> isotonic_decreasing(std::vector<double> x, std::vector<double> y,
                                        const std::vector<double>& at) {
  std::vector<double> out(at.size(), std::nan(""));
  if (x.empty()) return out;
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return x[a] < x[b]; });
  // Unique x with averaged y (weights = multiplicities).
  std::vector<double> ux, uy, uw;
  for (auto k : order) {
    if (!ux.empty() && ux.back() == x[k]) {
      uy.back() += y[k];
      uw.back() += 1;
    } else {
      ux.push_back(x[k]);
      uy.push_back(y[k]);
      uw.push_back(1);
    }
  }
  for (std::size_t i = 0; i < uy.size(); ++i)
    uy[i] /= uw[i];
  // PAVA for a non-increasing fit: blocks of (mean, weight, count).
  struct block {
    double mean, weight;
    std::size_t count;
  };
  std::vector<block> blocks;
  for (std::size_t i = 0; i < uy.size(); ++i) {
    blocks.push_back({uy[i], uw[i], 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean < blocks.back().mean) {
      auto b = blocks.back();
      blocks.pop_back();
      auto& a = blocks.back();
      a.mean = (a.mean * a.weight + b.mean * b.weight) / (a.weight + b.weight);
      a.weight += b.weight;
      a.count += b.count;
    }
  }
  std::vector<double> fit;
  fit.reserve(ux.size());
  for (const auto& b : blocks)
    fit.insert(fit.end(), b.count, b.mean);
  for (std::size_t j = 0; j < at.size(); ++j) {
    const double t = at[j];
    if (t <= ux.front()) {
      out[j] = fit.front();
    } else if (t >= ux.back()) {
      out[j] = fit.back();
    } else {
      const auto hi = static_cast<std::size_t>(std::upper_bound(ux.begin(), ux.end(), t) - ux.begin());
      const auto lo = hi - 1;
      const double w = (t - ux[lo]) / (ux[hi] - ux[lo]);
      out[j] = fit[lo] + w * (fit[hi] - fit[lo]);
    }
  }
  return out;
}

namespace {
struct curve_result {
  std::vector<double> p;
  double score = 0;
  double stop_fraction = 1;
};

curve_result p_curve(const space_statistics& st, const std::vector<const run_trace*>& runs,
                     const std::vector<double>& range) {
  const auto& dist = st.sorted_performances();
  const double opt = st.optimum();
  // Points (time, index of best so far), and each run's last time with a known best.
  std::vector<double> xs, ys, last_times;
  std::size_t total_points = 0;
  for (const auto* r : runs) {
    double best = INFINITY, last = std::nan("");
    for (const auto& t : *r) {
      ++total_points;
      if (t.ok()) best = std::min(best, t.time_ms);
      if (std::isfinite(best)) {
        xs.push_back(t.clock_s);
        ys.push_back(static_cast<double>(st.index_of(best)));
        last = t.clock_s;
      }
    }
    if (!std::isnan(last)) last_times.push_back(last);
  }
  curve_result res;
  res.p.assign(range.size(), 0.0);
  if (xs.empty()) {
    // No run found a correct configuration: as bad as the worst configuration.
    for (std::size_t k = 0; k < range.size(); ++k) {
      const double rnd = st.random_baseline(range[k]);
      res.p[k] = rnd == opt ? 0.0 : (dist.back() - rnd) / (opt - rnd);
    }
    res.score = mean_of(res.p);
    return res;
  }
  // Margin filter of curves.py: keep points within the range widened by 10% (+ a little more for few points).
  const double margin = 0.1 + 0.25 * static_cast<double>(runs.size()) /
                                  static_cast<double>(std::max<std::size_t>(total_points, 1));
  const double lo = range.front() * (1 - margin), hi = range.back() * (1 + margin);
  std::vector<double> fx, fy;
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (xs[i] >= lo && xs[i] <= hi) fx.push_back(xs[i]), fy.push_back(ys[i]);
  if (fx.empty()) {
    // Every point lies outside the range: use them all (clipping extends the nearest end).
    fx = xs;
    fy = ys;
  }
  const double ymin = *std::min_element(fy.begin(), fy.end()), ymax = *std::max_element(fy.begin(), fy.end());
  auto fitted = isotonic_decreasing(fx, fy, range);
  // Real stopping point: the first run end later than the median run end.
  std::sort(last_times.begin(), last_times.end());
  double stop_time = range.back();
  const double med_last = median_of(last_times);
  for (double t : last_times)
    if (t > med_last) {
      stop_time = t;
      break;
    }
  std::size_t stop_index = range.size();
  if (stop_time < range.back()) {
    for (std::size_t k = 0; k < range.size(); ++k)
      if (range[k] > stop_time) {
        stop_index = k;
        break;
      }
  }
  res.stop_fraction = static_cast<double>(stop_index) / static_cast<double>(range.size());
  for (std::size_t k = 0; k < range.size(); ++k) {
    const std::size_t kk = std::min(k, stop_index < range.size() ? stop_index : k);
    double idx = std::clamp(fitted[kk], ymin, ymax);
    idx = std::clamp(round_half_even(idx), 0.0, static_cast<double>(dist.size() - 1));
    const double f = dist[static_cast<std::size_t>(idx)];
    const double rnd = st.random_baseline(range[k]);
    res.p[k] = rnd == opt ? (f == opt ? 1.0 : 0.0) : (f - rnd) / (opt - rnd);
  }
  res.score = mean_of(res.p);
  return res;
}
}  // namespace

space_score score_runs(const space_statistics& st, const std::vector<run_trace>& runs,
                       const score_settings& s) {
  if (runs.empty()) throw error("no runs to score");
  space_score out;
  out.time_range = score_time_range(st, s);
  std::vector<const run_trace*> all;
  for (const auto& r : runs)
    all.push_back(&r);
  const auto pooled = p_curve(st, all, out.time_range);
  out.score = pooled.score;
  out.p_curve = pooled.p;
  out.real_stopping_fraction = pooled.stop_fraction;
  for (const auto& r : runs)
    out.per_run.push_back(p_curve(st, {&r}, out.time_range).score);
  out.per_run_mean = mean_of(out.per_run);
  double var = 0;
  for (double x : out.per_run)
    var += (x - out.per_run_mean) * (x - out.per_run_mean);
  out.per_run_std =
      out.per_run.size() > 1 ? std::sqrt(var / static_cast<double>(out.per_run.size() - 1)) : 0.0;
  return out;
}

}  // namespace kf
