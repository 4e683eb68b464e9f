#include "kforge/strategies/bayesian.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "kforge/error.hpp"
#include "kforge/strategies/common.hpp"

namespace kf::strategies {

namespace {
acquisition::kind acquisition_kind(const std::string& s) {
  if (s == "ei") return acquisition::kind::ei;
  if (s == "pi") return acquisition::kind::pi;
  if (s == "lcb") return acquisition::kind::lcb;
  if (s == "thompson") return acquisition::kind::thompson;
  return acquisition::kind::log_ei;
}
gp_kernel kernel_kind(const std::string& s) {
  if (s == "matern32") return gp_kernel::matern32;
  if (s == "rbf") return gp_kernel::rbf;
  return gp_kernel::matern52;
}
}  // namespace

void bayesian::set_transfer(std::shared_ptr<const transfer_data> t) {
  transfer_ = std::move(t);
  prior_ = transfer_ ? transfer_prior(*transfer_) : transfer_prior();
}

bool bayesian::has_prior_mean() const noexcept {
  return (!prior_.empty() && opt_.transfer_mean) || opt_.roofline_mean;
}

double bayesian::prior_mean(const config& c) const {
  double m = 0;
  if (!prior_.empty() && opt_.transfer_mean) m += prior_a_ + prior_b_ * prior_.score(c).value_or(0.0);
  if (roof_ready_) {
    std::vector<double> row(base_dim_);
    encode_base(c, row);
    m += roofline_terms(
        Eigen::Map<const Eigen::RowVectorXd>(row.data(), static_cast<Eigen::Index>(row.size())))(0);
  }
  return m;
}

Eigen::VectorXd bayesian::prior_means(const std::vector<config>& cfgs, const Eigen::MatrixXd& encoded) const {
  Eigen::VectorXd m = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(cfgs.size()));
  if (!prior_.empty() && opt_.transfer_mean)
    for (std::size_t i = 0; i < cfgs.size(); ++i)
      m(static_cast<Eigen::Index>(i)) = prior_a_ + prior_b_ * prior_.score(cfgs[i]).value_or(0.0);
  if (roof_ready_) m += roofline_terms(encoded);
  return m;
}

// a + b ln(max(e^r B(x), I(x))) with B and I the auxiliary GPs' predictions (rows of `encoded`; the
// auxiliary GPs see the configuration's own inputs, its first base_dim_ columns).
Eigen::VectorXd bayesian::roofline_terms(const Eigen::MatrixXd& encoded) const {
  const auto own = encoded.leftCols(static_cast<Eigen::Index>(base_dim_));
  Eigen::VectorXd lb(encoded.rows()), li(encoded.rows());
  roof_models_[0]->predict_mean(own, lb);
  roof_models_[1]->predict_mean(own, li);
  Eigen::VectorXd out(encoded.rows());
  for (Eigen::Index i = 0; i < encoded.rows(); ++i) {
    const double b = std::log(std::max(std::pow(10.0, lb(i)) - 1.0, 1.0));
    const double ins = std::log(std::max(std::pow(10.0, li(i)) - 1.0, 1.0));
    out(i) = roof_a_ + roof_b_ * std::max(b + roof_log_ratio_, ins);
  }
  return out;
}

// The roofline mean's fit: auxiliary GPs for log10(1 + bytes) and log10(1 + instructions) on the
// successful observations; then, over a grid of ratios r (around the median of ln I - ln B), the
// regression of log(time) (minus the transfer term) on L = ln max(e^r B, I) with the slope pulled
// toward 1 by 4 pseudo-observations; the r with the smallest squared error wins. L uses the GPs'
// predictions for evaluated configurations too (the model ranks candidates by predictions).
void bayesian::fit_roofline(const std::vector<double>& targets) {
  roof_ready_ = false;
  const std::size_t pd = base_dim_;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < obs_.size(); ++i)
    if (!std::isnan(obs_[i].log_time) && std::isfinite(obs_[i].bytes) && std::isfinite(obs_[i].instructions))
      rows.push_back(i);
  if (rows.size() < 5) return;
  Eigen::MatrixXd X(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(pd));
  Eigen::VectorXd yb(X.rows()), yi(X.rows());
  std::vector<double> enc(pd);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    encode_base(obs_[rows[r]].cfg, enc);
    for (std::size_t j = 0; j < pd; ++j)
      X(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) = enc[j];
    yb(static_cast<Eigen::Index>(r)) = std::log10(1.0 + std::max(obs_[rows[r]].bytes, 0.0));
    yi(static_cast<Eigen::Index>(r)) = std::log10(1.0 + std::max(obs_[rows[r]].instructions, 0.0));
  }
  for (int k = 0; k < 2; ++k) {
    if (!roof_models_[k]) {
      gp_options go;
      go.restarts = 1;
      go.seed = rng_();
      go.parallel = false;
      roof_models_[k] = std::make_unique<gp>(pd, go);
    }
    roof_models_[k]->fit(X, k == 0 ? yb : yi);
  }
  Eigen::VectorXd pb(X.rows()), pi(X.rows());
  roof_models_[0]->predict_mean(X, pb);
  roof_models_[1]->predict_mean(X, pi);
  std::vector<double> lb, li, t;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    lb.push_back(std::log(std::max(std::pow(10.0, pb(static_cast<Eigen::Index>(r))) - 1.0, 1.0)));
    li.push_back(std::log(std::max(std::pow(10.0, pi(static_cast<Eigen::Index>(r))) - 1.0, 1.0)));
    t.push_back(targets[rows[r]]);
  }
  std::vector<double> diff(lb.size());
  for (std::size_t r = 0; r < lb.size(); ++r)
    diff[r] = li[r] - lb[r];
  std::nth_element(diff.begin(), diff.begin() + static_cast<std::ptrdiff_t>(diff.size() / 2), diff.end());
  const double center = diff[diff.size() / 2];
  const auto n = static_cast<double>(t.size());
  double best_sse = std::numeric_limits<double>::infinity();
  for (double g = -6.0; g <= 6.0; g += 0.5) {
    const double ratio = center + g;
    double ml = 0, mt = 0;
    std::vector<double> L(t.size());
    for (std::size_t r = 0; r < t.size(); ++r) {
      L[r] = std::max(lb[r] + ratio, li[r]);
      ml += L[r];
      mt += t[r];
    }
    ml /= n;
    mt /= n;
    double sll = 0, slt = 0;
    for (std::size_t r = 0; r < t.size(); ++r) {
      sll += (L[r] - ml) * (L[r] - ml);
      slt += (L[r] - ml) * (t[r] - mt);
    }
    const double lambda = 4.0 * sll / n;
    const double b = sll + lambda > 0 ? (slt + lambda) / (sll + lambda) : 1.0;
    const double a = mt - b * ml;
    double sse = 0;
    for (std::size_t r = 0; r < t.size(); ++r)
      sse += std::pow(t[r] - a - b * L[r], 2);
    if (sse < best_sse) {
      best_sse = sse;
      roof_log_ratio_ = ratio;
      roof_a_ = a;
      roof_b_ = b;
    }
  }
  roof_ready_ = std::isfinite(best_sse);
}

// Static features from the transfer records: the first source holding a configuration gives its value.
void bayesian::load_static_features() {
  const std::size_t ns = opt_.static_features.size();
  static_values_.assign(ns, {});
  static_range_.assign(ns, {0.0, 1.0});
  static_log_.assign(ns, false);
  if (!transfer_) return;
  for (std::size_t k = 0; k < ns; ++k) {
    const auto& name = opt_.static_features[k];
    for (const auto& src : transfer_->sources)
      for (std::size_t i = 0; i < src.configs.size(); ++i)
        if (const auto it = src.metrics[i].find(name);
            it != src.metrics[i].end() && std::isfinite(it->second))
          static_values_[k].emplace(src.configs[i], it->second);
    double lo = INFINITY, hi = -INFINITY;
    bool positive = true;
    for (const auto& [c, v] : static_values_[k]) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      positive &= v >= 0;
    }
    static_log_[k] = positive && hi > 100 * std::max(lo, 1.0);
    if (static_log_[k]) lo = std::log10(lo + 1.0), hi = std::log10(hi + 1.0);
    if (std::isfinite(lo)) static_range_[k] = {lo, hi};
  }
}

double bayesian::static_feature(std::size_t k, const config& c) const {
  const auto it = static_values_[k].find(c);
  if (it == static_values_[k].end()) return 0.5;  // not in the records: the middle
  const double t = static_log_[k] ? std::log10(std::max(it->second, 0.0) + 1.0) : it->second;
  const auto [lo, hi] = static_range_[k];
  return hi > lo ? (t - lo) / (hi - lo) : 0.5;
}

// Metric targets of the multi-output GP: standardised, sign-aligned with log(time) (correlation over
// the successful observations) and put on log(time)'s mean and spread, so that one GP standardisation
// serves every task and the tasks' correlations are positive (what the task embedding can express).
void bayesian::update_output_scales() {
  std::vector<const observation*> ok;
  for (const auto& o : obs_)
    if (!std::isnan(o.log_time)) ok.push_back(&o);
  if (ok.size() < 3) return;
  double m = 0, m2 = 0;
  for (const auto* o : ok)
    m += o->log_time;
  m /= static_cast<double>(ok.size());
  for (const auto* o : ok)
    m2 += std::pow(o->log_time - m, 2);
  time_mean_ = m;
  time_sd_ = std::max(std::sqrt(m2 / static_cast<double>(ok.size())), 1e-6);
  for (std::size_t k = 0; k < opt_.metric_outputs.size(); ++k) {
    auto& sc = output_scale_[k];
    std::vector<std::pair<double, double>> pts;  // (raw, log time)
    bool positive = true;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto* o : ok)
      if (std::isfinite(o->outputs[k])) {
        pts.emplace_back(o->outputs[k], o->log_time);
        positive &= o->outputs[k] >= 0;
        lo = std::min(lo, o->outputs[k]);
        hi = std::max(hi, o->outputs[k]);
      }
    if (pts.size() < 3) continue;
    sc.log = positive && hi > 100 * std::max(lo, 1.0);
    double mv = 0, sv = 0, cov = 0;
    for (auto& [v, t] : pts) {
      v = sc.log ? std::log10(v + 1.0) : v;
      mv += v;
    }
    mv /= static_cast<double>(pts.size());
    for (const auto& [v, t] : pts) {
      sv += (v - mv) * (v - mv);
      cov += (v - mv) * (t - m);
    }
    sv = std::sqrt(sv / static_cast<double>(pts.size()));
    if (!(sv > 0)) continue;
    sc.mean = mv;
    sc.sd = sv;
    sc.sign = cov < 0 ? -1.0 : 1.0;
    sc.ready = true;
  }
}

double bayesian::output_target(std::size_t k, double raw) const {
  const auto& sc = output_scale_[k];
  const double v = sc.log ? std::log10(std::max(raw, 0.0) + 1.0) : raw;
  return time_mean_ + time_sd_ * sc.sign * (v - sc.mean) / sc.sd;
}

Eigen::RowVectorXd bayesian::output_row(const observation& o, std::size_t k) const {
  Eigen::RowVectorXd f = features(o.cfg, &o.metrics);
  f(static_cast<Eigen::Index>(task_offset_ + k)) = 1.0;
  return f;
}

double bayesian::best_log_time() const {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& o : obs_)
    if (!std::isnan(o.log_time)) best = std::min(best, o.log_time);
  return best;
}

// Ridge regression of the targets on the prior score: minimises sum (y_i - a - b p_i)^2 +
// strength (b - b0)^2, b0 = weight x the records' log-time spread (what a perfect transfer would give,
// shrunk). Few observations leave b near b0; many let the data decide, down to 0 (or below) where
// the other GPUs' order does not carry over.
void bayesian::fit_prior_mean(double fail) {
  prior_a_ = prior_b_ = 0;
  if (prior_.empty() || !opt_.transfer_mean) return;
  const double b0 = opt_.transfer_weight * prior_.log_time_spread();
  if (obs_.empty()) {
    prior_b_ = b0;
    return;
  }
  double my = 0, mp = 0;
  std::vector<double> ys, ps;
  for (const auto& o : obs_) {
    ys.push_back(std::isnan(o.log_time) ? fail : o.log_time);
    ps.push_back(prior_.score(o.cfg).value_or(0.0));
    my += ys.back();
    mp += ps.back();
  }
  const auto n = static_cast<double>(ys.size());
  my /= n;
  mp /= n;
  double spp = 0, spy = 0;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    spp += (ps[i] - mp) * (ps[i] - mp);
    spy += (ps[i] - mp) * (ys[i] - my);
  }
  prior_b_ = (spy + opt_.transfer_strength * b0) / (spp + opt_.transfer_strength);
  prior_a_ = my - prior_b_ * mp;
}

void bayesian::initialize(const search_space& space, std::uint64_t seed) {
  rng_.reseed(seed);
  prior_a_ = prior_b_ = 0;
  space_ = &space;
  aligned_params_ = opt_.alignment_features ? power_of_two_params(space) : std::vector<std::size_t>{};
  base_dim_ = space.encoded_dimension() + aligned_params_.size();
  static_offset_ = base_dim_ + opt_.metric_features.size();
  task_offset_ = static_offset_ + opt_.static_features.size();
  dim_ = task_offset_ + opt_.metric_outputs.size();
  output_scale_.assign(opt_.metric_outputs.size(), {});
  time_mean_ = 0;
  time_sd_ = 1;
  for (auto& m : roof_models_)
    m.reset();
  roof_ready_ = false;
  load_static_features();
  obs_.clear();
  metric_models_.clear();
  metric_range_.assign(opt_.metric_features.size(), {0.0, 1.0});
  metric_log_.assign(opt_.metric_features.size(), false);
  model_.reset();
  modelled_ = fitted_at_ = built_at_ = 0;
  const auto* valid = space.valid_if_enumerable();
  enumerated_ = valid != nullptr && valid->size() <= 5'000'000;
  if (enumerated_) {
    const auto& vs = space.valid();
    const std::size_t pd = base_dim_;
    encoded_.resize(static_cast<Eigen::Index>(vs.size()), static_cast<Eigen::Index>(pd));
    config c(space.dimension());
    std::vector<double> row(pd);
    for (std::size_t i = 0; i < vs.size(); ++i) {
      vs.decode(vs.rank(i), c);
      encode_base(c, row);
      for (std::size_t j = 0; j < pd; ++j)
        encoded_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = row[j];
    }
  }
}

void bayesian::encode_base(const config& c, std::span<double> row) const {
  space_->encode(c, row.first(space_->encoded_dimension()));
  std::size_t j = space_->encoded_dimension();
  for (const auto i : aligned_params_)
    row[j++] = is_power_of_two(space_->value_of(c, i)) ? 1.0 : 0.0;
}

Eigen::VectorXd bayesian::encode(const config& c) const {
  return features(c, nullptr).transpose();
}

double bayesian::scale_metric(std::size_t k, double raw) const {
  const double v = metric_log_[k] ? std::log10(std::max(raw, 0.0) + 1.0) : raw;
  const auto [lo, hi] = metric_range_[k];
  return hi > lo ? (v - lo) / (hi - lo) : 0.5;
}

Eigen::RowVectorXd bayesian::features(const config& c, const std::vector<double>* measured) const {
  const std::size_t pd = base_dim_;
  std::vector<double> row(pd);
  encode_base(c, row);
  Eigen::RowVectorXd f(static_cast<Eigen::Index>(dim_));
  for (std::size_t j = 0; j < pd; ++j)
    f(static_cast<Eigen::Index>(j)) = row[j];
  for (std::size_t k = 0; k < opt_.metric_features.size(); ++k) {
    double v = std::numeric_limits<double>::quiet_NaN();
    if (measured && opt_.metric_inputs == "measured" && k < measured->size() && std::isfinite((*measured)[k]))
      v = scale_metric(k, (*measured)[k]);
    if (!std::isfinite(v)) {
      if (k < metric_models_.size() && metric_models_[k] && metric_models_[k]->size() > 0) {
        Eigen::MatrixXd x = Eigen::Map<const Eigen::RowVectorXd>(row.data(), static_cast<Eigen::Index>(pd));
        Eigen::VectorXd m(1);
        metric_models_[k]->predict_mean(x, m);
        v = m(0);
      } else {
        v = 0.5;
      }
    }
    f(static_cast<Eigen::Index>(pd + k)) = std::clamp(v, -0.5, 1.5);
  }
  for (std::size_t k = 0; k < opt_.static_features.size(); ++k)
    f(static_cast<Eigen::Index>(static_offset_ + k)) = static_feature(k, c);
  for (std::size_t k = 0; k < opt_.metric_outputs.size(); ++k)
    f(static_cast<Eigen::Index>(task_offset_ + k)) = 0.0;  // the time task
  return f;
}

void bayesian::update_metric_models() {
  const std::size_t pd = base_dim_;
  metric_models_.resize(opt_.metric_features.size());
  for (std::size_t k = 0; k < opt_.metric_features.size(); ++k) {
    std::vector<std::size_t> rows;
    bool positive = true;
    double lo = INFINITY, hi = -INFINITY, rlo = INFINITY, rhi = -INFINITY;
    for (std::size_t i = 0; i < obs_.size(); ++i) {
      if (k >= obs_[i].metrics.size() || !std::isfinite(obs_[i].metrics[k])) continue;
      rows.push_back(i);
      const double raw = obs_[i].metrics[k];
      positive &= raw >= 0;
      rlo = std::min(rlo, raw);
      rhi = std::max(rhi, raw);
    }
    if (rows.size() < 3) continue;
    // Counts spanning orders of magnitude are modelled on a log scale.
    metric_log_[k] = positive && rhi > 100 * std::max(rlo, 1.0);
    for (auto i : rows) {
      const double v = metric_log_[k] ? std::log10(obs_[i].metrics[k] + 1.0) : obs_[i].metrics[k];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    metric_range_[k] = {lo, hi};
    Eigen::MatrixXd X(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(pd));
    Eigen::VectorXd y(static_cast<Eigen::Index>(rows.size()));
    std::vector<double> row(pd);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      encode_base(obs_[rows[r]].cfg, row);
      for (std::size_t j = 0; j < pd; ++j)
        X(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) = row[j];
      y(static_cast<Eigen::Index>(r)) = scale_metric(k, obs_[rows[r]].metrics[k]);
    }
    if (!metric_models_[k]) {
      gp_options go;
      go.restarts = 1;
      go.seed = rng_();
      go.parallel = false;
      metric_models_[k] = std::make_unique<gp>(pd, go);
    }
    metric_models_[k]->fit(X, y);
  }
}

void bayesian::observe(const search_state&, std::span<const trial> done) {
  for (const auto& t : done) {
    observation o{
        t.cfg, t.ok() && t.time_ms > 0 ? std::log(t.time_ms) : std::numeric_limits<double>::quiet_NaN(),
        {},    {},
        0.0,   0.0};
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    for (const auto& name : opt_.metric_features) {
      const auto m = t.metric(name);
      o.metrics.push_back(t.ok() && m ? *m : nan);
    }
    for (const auto& name : opt_.metric_outputs) {
      const auto m = t.metric(name);
      o.outputs.push_back(t.ok() && m && std::isfinite(*m) ? *m : nan);
    }
    // DRAM bytes (CUPTI names as the cuda evaluator and KTT record them) and executed instructions.
    const auto sum = [&](const char* a, const char* b, double scale) {
      const auto x = t.metric(a), y = t.metric(b);
      return x && y ? scale * (*x + *y) : nan;
    };
    o.bytes = sum("dram__bytes_read.sum", "dram__bytes_write.sum", 1.0);
    if (std::isnan(o.bytes)) o.bytes = sum("dram__sectors_read.sum", "dram__sectors_write.sum", 32.0);
    const auto ins = t.metric("smsp__inst_executed.sum");
    o.instructions = ins ? *ins : nan;
    if (!t.ok()) o.bytes = o.instructions = nan;
    obs_.push_back(std::move(o));
  }
}

double bayesian::worst_log_time() const {
  double worst = -std::numeric_limits<double>::infinity();
  for (const auto& o : obs_)
    if (!std::isnan(o.log_time)) worst = std::max(worst, o.log_time);
  return worst;
}

Eigen::MatrixXd bayesian::training_inputs(double fail, std::vector<double>& y) const {
  std::vector<std::size_t> keep(obs_.size());
  std::iota(keep.begin(), keep.end(), 0);
  if (obs_.size() > opt_.max_points) {
    // The best three quarters by time and the most recent quarter.
    const std::size_t recent = opt_.max_points / 4, best = opt_.max_points - recent;
    std::vector<std::size_t> older(obs_.size() - recent);
    std::iota(older.begin(), older.end(), 0);
    auto value = [&](std::size_t i) { return std::isnan(obs_[i].log_time) ? fail : obs_[i].log_time; };
    std::stable_sort(older.begin(), older.end(), [&](auto a, auto b) { return value(a) < value(b); });
    older.resize(best);
    std::sort(older.begin(), older.end());
    keep = older;
    for (std::size_t i = obs_.size() - recent; i < obs_.size(); ++i)
      keep.push_back(i);
  }
  // Multi-output rows: per metric, the best metric_output_points successful observations of the window.
  std::vector<std::pair<std::size_t, std::size_t>> aux;  // (observation, metric)
  for (std::size_t k = 0; k < opt_.metric_outputs.size(); ++k) {
    if (!output_scale_[k].ready) continue;
    std::vector<std::size_t> with;
    for (const auto i : keep)
      if (!std::isnan(obs_[i].log_time) && std::isfinite(obs_[i].outputs[k])) with.push_back(i);
    std::stable_sort(with.begin(), with.end(),
                     [&](auto a, auto b) { return obs_[a].log_time < obs_[b].log_time; });
    if (with.size() > opt_.metric_output_points) with.resize(opt_.metric_output_points);
    for (const auto i : with)
      aux.emplace_back(i, k);
  }
  Eigen::MatrixXd X(static_cast<Eigen::Index>(keep.size() + aux.size()), static_cast<Eigen::Index>(dim_));
  y.clear();
  for (std::size_t r = 0; r < keep.size(); ++r) {
    X.row(static_cast<Eigen::Index>(r)) = features(obs_[keep[r]].cfg, &obs_[keep[r]].metrics);
    y.push_back((std::isnan(obs_[keep[r]].log_time) ? fail : obs_[keep[r]].log_time) -
                prior_mean(obs_[keep[r]].cfg));
  }
  for (std::size_t r = 0; r < aux.size(); ++r) {
    const auto& [i, k] = aux[r];
    X.row(static_cast<Eigen::Index>(keep.size() + r)) = output_row(obs_[i], k);
    y.push_back(output_target(k, obs_[i].outputs[k]));
  }
  return X;
}

void bayesian::update_model() {
  const std::size_t n = obs_.size();
  if (n == modelled_ && model_) return;
  // Failures: the worst observed log(time) plus the penalty.
  const double worst = worst_log_time();
  const bool any_ok = std::isfinite(worst);
  const double fail = any_ok ? worst + opt_.failure_penalty : 0.0;
  // Hyperparameters are re-estimated every refit_every observations at first, then every eighth of the
  // observations seen at the last fit (the training window is capped at max_points, so they settle and
  // a full fit per observation would dominate long runs).
  const bool refit = !model_ || !any_ok || n >= fitted_at_ + std::max(opt_.refit_every, fitted_at_ / 8);
  // Between rebuilds new observations are appended (O(n^2) each): exact while no failure target moved.
  // Past max_points the window (best 3/4 + most recent 1/4) is rebuilt every refit_every observations,
  // so the model holds at most max_points + refit_every points.
  const bool window_due = n > opt_.max_points && n >= built_at_ + opt_.refit_every;
  if (!refit && !window_due && fail == penalty_value_) {
    for (std::size_t i = modelled_; i < n; ++i) {
      model_->append(features(obs_[i].cfg, &obs_[i].metrics).transpose(),
                     (std::isnan(obs_[i].log_time) ? fail : obs_[i].log_time) - prior_mean(obs_[i].cfg));
      for (std::size_t k = 0; k < opt_.metric_outputs.size(); ++k)
        if (output_scale_[k].ready && !std::isnan(obs_[i].log_time) && std::isfinite(obs_[i].outputs[k]))
          model_->append(output_row(obs_[i], k).transpose(), output_target(k, obs_[i].outputs[k]));
    }
    modelled_ = n;
    return;
  }
  if (refit && !opt_.metric_features.empty()) update_metric_models();
  if (refit && !opt_.metric_outputs.empty()) update_output_scales();
  fit_prior_mean(fail);
  if (opt_.roofline_mean && refit) {
    roof_ready_ = false;  // the roofline term is fitted to log(time) minus the transfer term
    std::vector<double> targets(obs_.size());
    for (std::size_t i = 0; i < obs_.size(); ++i)
      targets[i] = (std::isnan(obs_[i].log_time) ? fail : obs_[i].log_time) - prior_mean(obs_[i].cfg);
    fit_roofline(targets);
  }
  std::vector<double> y;
  const Eigen::MatrixXd X = training_inputs(fail, y);
  const Eigen::Map<const Eigen::VectorXd> Y(y.data(), static_cast<Eigen::Index>(y.size()));
  if (!model_) {
    gp_options go;
    go.kernel = kernel_kind(opt_.kernel);
    go.restarts = opt_.restarts;
    go.seed = rng_();
    go.parallel = false;  // strategies run many seeds in parallel already
    model_ = std::make_unique<gp>(dim_, go);
  }
  if (refit) {
    model_->fit(X, Y);
    fitted_at_ = n;
  } else {
    model_->fit_fixed(X, Y, model_->hyper());
  }
  modelled_ = built_at_ = n;
  penalty_value_ = fail;
}

std::vector<std::size_t> bayesian::candidates(const search_state& s, const std::vector<config>& taken) {
  std::vector<std::size_t> out;
  const auto& vs = s.space().valid();
  auto fresh = [&](const config& c) {
    return !s.seen(c) && std::find(taken.begin(), taken.end(), c) == taken.end();
  };
  const std::size_t unvisited = vs.size() - s.history().size();
  if (unvisited <= opt_.max_candidates) {
    config c(s.space().dimension());
    for (std::size_t i = 0; i < vs.size(); ++i) {
      vs.decode(vs.rank(i), c);
      if (fresh(c)) out.push_back(i);
    }
    return out;
  }
  // A random sample, plus the one-parameter neighbours of the five best configurations.
  for (const auto b : best_observations(5))
    for (const auto& n : s.space().neighbours(obs_[b].cfg, neighbourhood::hamming))
      if (fresh(n)) {
        if (auto idx = vs.index_of(n)) out.push_back(*idx);
      }
  for (std::size_t tries = 0; out.size() < opt_.max_candidates && tries < 4 * opt_.max_candidates; ++tries) {
    const auto i = static_cast<std::size_t>(rng_.index(vs.size()));
    if (fresh(vs.at(i))) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::size_t> bayesian::best_observations(std::size_t k) const {
  std::vector<std::size_t> best(obs_.size());
  std::iota(best.begin(), best.end(), 0);
  std::stable_sort(best.begin(), best.end(), [&](auto a, auto b) {
    const double x = std::isnan(obs_[a].log_time) ? INFINITY : obs_[a].log_time;
    const double y = std::isnan(obs_[b].log_time) ? INFINITY : obs_[b].log_time;
    return x < y;
  });
  best.resize(std::min(k, best.size()));
  return best;
}

std::vector<config> bayesian::sampled_candidates(const search_state& s, const std::vector<config>& taken) {
  const auto& space = s.space();
  std::unordered_set<config, config_hash> picked(taken.begin(), taken.end());
  std::vector<config> out;
  auto add = [&](config c) {
    if (!s.seen(c) && picked.insert(c).second) out.push_back(std::move(c));
  };
  // The one-parameter neighbours of the five best configurations, then uniform draws.
  for (const auto b : best_observations(5))
    for (auto& c : space.neighbours(obs_[b].cfg, neighbourhood::hamming))
      add(std::move(c));
  for (std::size_t tries = 0; out.size() < opt_.max_candidates && tries < 2 * opt_.max_candidates; ++tries) {
    try {
      add(space.sample(rng_, 1000));
    } catch (const error&) {
      break;  // no valid configuration in 1000 draws: the neighbours are the candidates
    }
  }
  return out;
}

std::vector<config> bayesian::propose(const search_state& s, std::size_t n) {
  std::vector<config> out;
  // Initial design: the transfer prior's best first, then uniform draws (uniform draws also on spaces
  // too large to enumerate).
  while (out.size() < n && obs_.size() + out.size() < opt_.transfer_initial) {
    auto c = best_unseen_by_prior(s, prior_, out);
    if (!c) break;
    out.push_back(std::move(*c));
  }
  while (out.size() < n && obs_.size() + out.size() < opt_.initial_samples) {
    auto c = draw_unseen(s, rng_, out);
    if (!c) return out;
    out.push_back(std::move(*c));
  }
  if (out.size() == n) return out;
  update_model();
  // The candidates: indices into the valid set (enumerated, encodings precomputed), or a sample of the
  // space and the best configurations' neighbours (a space too large to enumerate), encoded here.
  std::vector<std::size_t> cand;
  std::vector<config> cand_cfg;
  if (enumerated_) {
    cand = candidates(s, out);
    const auto& vs = s.space().valid();
    for (auto i : cand)
      cand_cfg.push_back(vs.at(i));
  } else {
    cand_cfg = sampled_candidates(s, out);
  }
  if (cand_cfg.empty()) return out;
  Eigen::MatrixXd X(static_cast<Eigen::Index>(cand_cfg.size()), static_cast<Eigen::Index>(dim_));
  const auto pd = static_cast<Eigen::Index>(base_dim_);
  std::vector<double> base_row(base_dim_);
  for (std::size_t i = 0; i < cand_cfg.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    if (enumerated_) {
      X.row(r).head(pd) = encoded_.row(static_cast<Eigen::Index>(cand[i]));
    } else {
      encode_base(cand_cfg[i], base_row);
      for (Eigen::Index j = 0; j < pd; ++j)
        X(r, j) = base_row[static_cast<std::size_t>(j)];
    }
    for (std::size_t k = 0; k < opt_.static_features.size(); ++k)
      X(r, static_cast<Eigen::Index>(static_offset_ + k)) = static_feature(k, cand_cfg[i]);
    for (std::size_t k = 0; k < opt_.metric_outputs.size(); ++k)
      X(r, static_cast<Eigen::Index>(task_offset_ + k)) = 0.0;  // the time task
  }
  // Metric features of the candidates: the auxiliary GPs' means, scaled like the measured ones.
  for (std::size_t k = 0; k < opt_.metric_features.size(); ++k) {
    Eigen::VectorXd m(static_cast<Eigen::Index>(cand_cfg.size()));
    if (k < metric_models_.size() && metric_models_[k] && metric_models_[k]->size() > 0)
      metric_models_[k]->predict_mean(X.leftCols(pd), m);
    else
      m.setConstant(0.5);
    X.col(pd + static_cast<Eigen::Index>(k)) = m.array().max(-0.5).min(1.5).matrix();
  }
  acquisition::spec spec;
  spec.type = acquisition_kind(opt_.acquisition);
  spec.beta = opt_.beta;
  spec.xi = opt_.xi;
  spec.screen = opt_.screening == "sparse" ? acquisition::screening::sparse : acquisition::screening::exact;
  spec.screen_min_points = opt_.screen_min_points;
  spec.screen_keep = opt_.screen_keep;
  spec.sparse.inducing_points = opt_.inducing_points;
  // Seeded by the model's seed (itself from the strategy's) and the observation count, so that the
  // strategy's own random stream is not touched: runs that never screen stay as they were.
  spec.sparse.seed = model_->options().seed ^ (0x9e3779b97f4a7c15ULL * (obs_.size() + 1));
  if (has_prior_mean()) {
    // The GP models log(time) minus the prior mean: add it back, and compare with log(time).
    spec.mean_offset = prior_means(cand_cfg, X.leftCols(pd));
    const double best = best_log_time();
    spec.best = std::isfinite(best) ? best : penalty_value_;
  }
  const gp* m = model_.get();
  std::unique_ptr<gp> conditioned;
  std::vector<bool> used(cand_cfg.size(), false);
  while (out.size() < n) {
    const auto sel = acquisition::select(*m, X, spec, 8, &rng_);
    std::optional<std::size_t> pick;
    for (const auto& ch : sel.top)
      if (!used[ch.index]) {
        pick = ch.index;
        break;
      }
    if (!pick) {
      for (std::size_t i = 0; i < used.size() && !pick; ++i)
        if (!used[i]) pick = i;
      if (!pick) break;
    }
    used[*pick] = true;
    out.push_back(cand_cfg[*pick]);
    if (out.size() < n) {
      // Kriging believer: the next pick sees this one as observed at the model's mean.
      Eigen::MatrixXd p = X.row(static_cast<Eigen::Index>(*pick));
      conditioned = std::make_unique<gp>(m->condition_on_pending(p));
      m = conditioned.get();
      X.row(static_cast<Eigen::Index>(*pick)).setConstant(-1e3);  // far away: never picked again
    }
  }
  return out;
}

void register_bayesian() {
  strategy_registry().add({
      "bo",
      "Bayesian optimisation: Gaussian process (ARD Matern 5/2) on the encoded configuration, acquisition "
      "maximised over the unvisited valid configurations",
      {
          int_option("initial_samples", 10, "uniform draws before the model is used", 1, 100000),
          string_option("acquisition", "log_ei", "acquisition function",
                        {"ei", "log_ei", "pi", "lcb", "thompson"}),
          real_option("beta", 2.0, "lcb: weight of the standard deviation", 0, 100),
          real_option("xi", 0.0, "ei, log_ei, pi: required improvement (log-time units)", 0, 10),
          string_option("kernel", "matern52", "GP kernel", {"matern52", "matern32", "rbf"}),
          int_option("refit_every", 8, "observations between hyperparameter fits", 1, 100000),
          int_option("max_points", 400, "training points at most (best 3/4 + most recent 1/4)", 10, 100000),
          int_option("max_candidates", 20000, "unvisited configurations scored exhaustively up to this many",
                     100, 10000000),
          real_option("failure_penalty", 1.0, "a failure's target: worst log(time) plus this", 0, 100),
          int_option("restarts", 2, "L-BFGS runs per hyperparameter fit", 1, 100),
          string_option("screening", "sparse",
                        "exact: every candidate's acquisition from the exact GP; sparse: from "
                        "screen_min_points training points on (so never with max_points below it), the "
                        "screen_keep best candidates by a sparse GP's acquisition go to the exact stage "
                        "(docs/gp.md)",
                        {"exact", "sparse"}),
          int_option("screen_min_points", 500, "sparse screening: training points from which it is used", 1,
                     10000000),
          int_option("screen_keep", 2048, "sparse screening: candidates kept for the exact acquisition", 1,
                     10000000),
          int_option("inducing_points", 128, "sparse screening: inducing points (k-means++ on the inputs)", 1,
                     100000),
          optional_option(
              "metric_features", option_type::list,
              "profiling metrics used as model inputs (predicted by auxiliary GPs for candidates)"),
          string_option("metric_inputs", "measured",
                        "metric inputs of evaluated configurations: measured, or predicted as for candidates",
                        {"measured", "predicted"}),
          int_option("transfer_initial", 3,
                     "with transfer: initial configurations taken from the records' best", 0, 100000),
          bool_option("transfer_mean", true, "with transfer: the records' prior as the GP's mean function"),
          real_option("transfer_weight", 0.5,
                      "with transfer: prior slope of the mean, as a fraction of the records' log-time spread",
                      -10, 10),
          real_option("transfer_strength", 4.0, "with transfer: pseudo-observations holding that slope", 0,
                      1e6),
          optional_option("metric_outputs", option_type::list,
                          "profiling metrics as auxiliary outputs of a multi-output GP (task coordinates)"),
          int_option("metric_output_points", 100, "auxiliary rows per metric output at most", 1, 100000),
          optional_option("static_features", option_type::list,
                          "metrics known before running, as inputs (read from the transfer records)"),
          bool_option("roofline_mean", false,
                      "a roofline-shaped mean: log(time) ~ a + b ln max(r bytes, instructions), predicted"),
          bool_option("alignment_features", false,
                      "an input per integer parameter that mixes powers of two with other values: whether "
                      "the value is a power of two"),
      },
      [](const options& o) {
        bayesian_options b;
        b.initial_samples = static_cast<std::size_t>(o.integer("initial_samples"));
        b.acquisition = o.string("acquisition");
        b.beta = o.real("beta");
        b.xi = o.real("xi");
        b.kernel = o.string("kernel");
        b.refit_every = static_cast<std::size_t>(o.integer("refit_every"));
        b.max_points = static_cast<std::size_t>(o.integer("max_points"));
        b.max_candidates = static_cast<std::size_t>(o.integer("max_candidates"));
        b.failure_penalty = o.real("failure_penalty");
        b.restarts = static_cast<int>(o.integer("restarts"));
        b.screening = o.string("screening");
        b.screen_min_points = static_cast<std::size_t>(o.integer("screen_min_points"));
        b.screen_keep = static_cast<std::size_t>(o.integer("screen_keep"));
        b.inducing_points = static_cast<std::size_t>(o.integer("inducing_points"));
        b.metric_inputs = o.string("metric_inputs");
        b.transfer_initial = static_cast<std::size_t>(o.integer("transfer_initial"));
        b.transfer_mean = o.boolean("transfer_mean");
        b.transfer_weight = o.real("transfer_weight");
        b.transfer_strength = o.real("transfer_strength");
        const auto names = [&](const char* key, std::vector<std::string>& out) {
          if (!o.has(key)) return;
          for (const auto& m : o.json(key)) {
            if (!m.is_string()) o.fail(key, "expected metric names");
            out.push_back(m.get<std::string>());
          }
        };
        names("metric_outputs", b.metric_outputs);
        names("static_features", b.static_features);
        b.metric_output_points = static_cast<std::size_t>(o.integer("metric_output_points"));
        b.roofline_mean = o.boolean("roofline_mean");
        b.alignment_features = o.boolean("alignment_features");
        if (o.has("metric_features")) {
          for (const auto& m : o.json("metric_features")) {
            if (!m.is_string()) o.fail("metric_features", "expected metric names");
            b.metric_features.push_back(m.get<std::string>());
          }
        }
        return strategy(bayesian(b), "bo");
      },
  });
}

}  // namespace kf::strategies
