#include "kforge/strategies/profile_guided.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kforge/strategies/common.hpp"

namespace kf::strategies {

namespace {
constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();

double sum_metrics(const trial& t, const char* a, const char* b) {
  const auto x = t.metric(a), y = t.metric(b);
  return x && y ? *x + *y : nan_v;
}
}  // namespace

void profile_guided::initialize(const search_space& space, std::uint64_t seed) {
  rng_.reseed(seed);
  space_ = &space;
  obs_.clear();
  for (auto& m : models_) m.reset();
  fitted_at_ = 0;
}

void profile_guided::observe(const search_state&, std::span<const trial> done) {
  for (const auto& t : done) {
    obs o;
    o.cfg = t.cfg;
    o.time = fitness(t);
    double bytes = sum_metrics(t, "dram__bytes_read.sum", "dram__bytes_write.sum");
    if (std::isnan(bytes)) bytes = 32 * sum_metrics(t, "dram__sectors_read.sum", "dram__sectors_write.sum");
    o.c[dram_bytes] = t.ok() ? bytes : nan_v;
    const auto occ = t.metric("sm__warps_active.avg.pct_of_peak_sustained_active");
    const auto ins = t.metric("smsp__inst_executed.sum");
    const auto pct = t.metric("dram__throughput.avg.pct_of_peak_sustained_elapsed");
    o.c[occupancy] = t.ok() && occ ? *occ : nan_v;
    o.c[instructions] = t.ok() && ins ? *ins : nan_v;
    o.c[dram_pct] = t.ok() && pct ? *pct : nan_v;
    obs_.push_back(o);
  }
}

void profile_guided::refit() {
  const std::size_t d = space_->encoded_dimension();
  for (int k = 0; k < dram_pct; ++k) {
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < obs_.size(); ++i)
      if (std::isfinite(obs_[i].c[k]) && obs_[i].c[k] >= 0) rows.push_back(i);
    if (rows.size() < 3) continue;
    Eigen::MatrixXd X(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(d));
    Eigen::VectorXd y(static_cast<Eigen::Index>(rows.size()));
    std::vector<double> row(d);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      space_->encode(obs_[rows[r]].cfg, row);
      for (std::size_t j = 0; j < d; ++j) X(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) = row[j];
      // Counts are modelled in log space, percentages as they are.
      y(static_cast<Eigen::Index>(r)) = k == occupancy ? obs_[rows[r]].c[k] : std::log1p(obs_[rows[r]].c[k]);
    }
    if (!models_[k]) {
      gp_options go;
      go.restarts = 1;
      go.seed = rng_();
      go.parallel = false;
      models_[k] = std::make_unique<gp>(d, go);
    }
    models_[k]->fit(X, y);
  }
  fitted_at_ = obs_.size();
}

std::vector<config> profile_guided::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  const auto& space = s.space();
  auto fresh = [&](const config& c) { return !s.seen(c) && std::find(out.begin(), out.end(), c) == out.end(); };
  while (out.size() < n && s.history().size() + out.size() < opt_.initial_samples) {
    auto c = draw_unseen(s, rng_, out);
    if (!c) return out;
    out.push_back(std::move(*c));
  }
  if (out.size() == n) return out;
  if (obs_.size() >= fitted_at_ + opt_.refit_every || fitted_at_ == 0) refit();
  // The best configuration and its bottleneck weights.
  const auto best_it = std::min_element(obs_.begin(), obs_.end(), [](const obs& a, const obs& b) { return a.time < b.time; });
  if (best_it == obs_.end()) return out;
  const obs& best = *best_it;
  double w_mem = std::isfinite(best.c[dram_pct]) ? std::clamp(best.c[dram_pct] / 100.0, 0.0, 1.0) : 0.0;
  double w_occ = std::isfinite(best.c[occupancy]) ? std::clamp(1.0 - best.c[occupancy] / 100.0, 0.0, 1.0) : 0.0;
  double w_ins = std::isfinite(best.c[dram_pct]) ? 1.0 - w_mem : 0.0;
  while (out.size() < n) {
    // Candidates: one and two parameters away from the best, and random ones.
    std::vector<config> cand;
    for (const auto& a : space.neighbours(best.cfg, neighbourhood::hamming)) {
      if (fresh(a)) cand.push_back(a);
      if (cand.size() < 400)
        for (const auto& b : space.neighbours(a, neighbourhood::strictly_adjacent))
          if (fresh(b) && std::find(cand.begin(), cand.end(), b) == cand.end()) cand.push_back(b);
    }
    for (std::size_t k = 0; k < opt_.random_candidates; ++k)
      if (auto c = draw_unseen(s, rng_, out); c && std::find(cand.begin(), cand.end(), *c) == cand.end()) cand.push_back(*c);
    if (cand.empty()) break;
    std::vector<double> score(cand.size(), 0.0);
    const std::size_t d = space.encoded_dimension();
    Eigen::MatrixXd X(static_cast<Eigen::Index>(cand.size()), static_cast<Eigen::Index>(d));
    std::vector<double> row(d);
    for (std::size_t i = 0; i < cand.size(); ++i) {
      space.encode(cand[i], row);
      for (std::size_t j = 0; j < d; ++j) X(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = row[j];
    }
    auto add = [&](int k, double weight, bool lower_is_better) {
      if (weight <= 0 || !models_[k] || !std::isfinite(best.c[k]) || best.c[k] <= 0) return;
      Eigen::VectorXd m(static_cast<Eigen::Index>(cand.size()));
      models_[k]->predict_mean(X, m);
      for (std::size_t i = 0; i < cand.size(); ++i) {
        const double pred = k == occupancy ? m(static_cast<Eigen::Index>(i)) : std::expm1(m(static_cast<Eigen::Index>(i)));
        double rel = k == occupancy ? (pred - best.c[k]) / 100.0 : (best.c[k] - pred) / best.c[k];
        if (!lower_is_better) rel = -rel;
        score[i] += weight * std::clamp(rel, -1.0, 1.0);
      }
    };
    add(dram_bytes, w_mem, true);
    add(occupancy, w_occ, true);  // the relative change is already signed toward higher occupancy
    add(instructions, w_ins, true);
    double total = 0;
    std::vector<double> weight(cand.size());
    for (std::size_t i = 0; i < cand.size(); ++i) {
      weight[i] = score[i] > opt_.cutoff ? std::pow(score[i] - opt_.cutoff, opt_.power) : 0.0;
      total += weight[i];
    }
    std::size_t pick = 0;
    if (total > 0 && std::isfinite(total)) {
      double u = rng_.uniform() * total;
      for (std::size_t i = 0; i < cand.size(); ++i) {
        u -= weight[i];
        if (u <= 0) {
          pick = i;
          break;
        }
      }
    } else {
      pick = static_cast<std::size_t>(rng_.index(cand.size()));
    }
    out.push_back(cand[pick]);
  }
  return out;
}

void register_profile_guided() {
  strategy_registry().add({
      "profile",
      "counter-guided search (after KTT's profile-based searcher): bottlenecks of the best configuration weight "
      "the predicted counter changes of its neighbours",
      {
          int_option("initial_samples", 10, "uniform draws before the counters are used", 1, 100000),
          int_option("random_candidates", 100, "random candidates besides the neighbours", 0, 100000),
          real_option("cutoff", -0.25, "candidates scoring below this are dropped", -10, 10),
          real_option("power", 8.0, "selection probability grows as (score - cutoff)^power", 0, 64),
          int_option("refit_every", 8, "observations between counter-model fits", 1, 100000),
      },
      [](const options& o) {
        profile_options p;
        p.initial_samples = static_cast<std::size_t>(o.integer("initial_samples"));
        p.random_candidates = static_cast<std::size_t>(o.integer("random_candidates"));
        p.cutoff = o.real("cutoff");
        p.power = o.real("power");
        p.refit_every = static_cast<std::size_t>(o.integer("refit_every"));
        return strategy(profile_guided(p), "profile");
      },
  });
}

}  // namespace kf::strategies
