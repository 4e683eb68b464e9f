// Strategy "bo": Bayesian optimisation with a Gaussian process over the encoded configuration
// (kf::gp) and an acquisition maximised over the discrete valid space (kf::acquisition).
//
//   - initial design: `initial_samples` uniform draws from the valid configurations;
//   - targets: log(time); a failed configuration gets the worst observed log(time) plus `failure_penalty`
//     (so the model steers away from failures without a separate feasibility model);
//   - the model: ARD kernel (matern52 by default), hyperparameters by maximum marginal likelihood every
//     `refit_every` observations at first, then every eighth of the observations seen at the last fit;
//     O(n^2) appends in between; at most `max_points` training points (beyond that, the best three
//     quarters and the most recent quarter, a window rebuilt every `refit_every` observations);
//   - candidates: every unvisited valid configuration when there are at most `max_candidates`, else a
//     random sample of that many plus the one-parameter neighbours of the best configurations; on a
//     space of more than 5e6 valid configurations (or too large to enumerate), the same sample drawn
//     from the space itself, encoded per proposal;
//   - batches: one pick at a time, the model conditioned on the picks so far (kriging believer).
// Profiling metrics as features (metric_features: a list of metric names; empty by default): an auxiliary
// GP per metric predicts it from the configuration; the runtime model's inputs are the encoded
// configuration and the metrics, scaled to [0,1] (log scale for counts) — measured values for evaluated
// configurations, the auxiliary GPs' means for candidates (surrogate.md, "function network", plug-in);
// with metric_inputs: predicted, the auxiliary GPs' means for both, so that the runtime model is trained
// on the same kind of input it ranks candidates by.
// Transfer (docs/transfer.md; records of the same kernel on other GPUs, set_transfer): the first
// `transfer_initial` configurations are the best by the records' prior (kf::transfer_prior); the GP
// then models log(time) minus a prior mean a + b p(x), p the prior score, (a, b) by ridge regression
// on the observations with b pulled toward b0 = transfer_weight x the records' log-time spread by
// `transfer_strength` pseudo-observations; the acquisition adds the prior mean back (EI of log(time)).
// Metrics in the surrogate, other than as inputs (issue 15 item 2; docs/benchmarks.md has the ablation):
//   metric_outputs: [names]  a multi-output GP: each metric is an auxiliary output of the same GP, whose
//                            inputs are the encoded configuration plus a one-hot task coordinate (time: all
//                            zero); the ARD length scale of a task's coordinate sets how much it shares with
//                            time (with the rbf kernel this is exactly an intrinsic coregionalisation model
//                            of rank one plus a diagonal; with Matern the same embedding, not separable).
//                            Metric targets are standardised, sign-aligned with log(time) and put on its
//                            scale; at most metric_output_points rows per metric (the best observations).
//                            Candidates are scored on the time task: nothing is predicted as an input.
//   static_features: [names] metrics known before a configuration runs (registers, shared and local memory)
//                            as inputs, read from the transfer records (a compile-only pass in a real run; in
//                            replay the run's own recording; their times are not used unless transfer_initial
//                            and transfer_mean say so).
//   roofline_mean            a mean function shaped like the roofline:
//                            log(time) ~ a + b log(max(r B(x), I(x))) with B the DRAM bytes and I the
//                            executed instructions (auxiliary GPs' predictions, for evaluated
//                            configurations too), r, a, b fitted to the observations (b held near 1 by 4
//                            pseudo-observations); the GP models the rest.
// Alignment inputs (alignment_features): one more 0/1 input per parameter of sizes that mixes powers of two
// with other values (power_of_two_params in common.hpp): whether the value is a power of two. Known before
// a configuration runs, like the static features; lets the model separate 64 from its neighbours 48 and 80
// by index (docs/benchmarks.md, "Alignment inputs", has the replay measurements).
// Options (defaults): initial_samples 10, acquisition log_ei (ei, log_ei, pi, lcb, thompson), beta 2 (lcb),
// xi 0, kernel matern52 (matern32, rbf), refit_every 8, max_points 400, max_candidates 20000,
// failure_penalty 1.0, restarts 2; screening sparse (screen_min_points 500, screen_keep 2048,
// inducing_points 128; docs/gp.md); transfer_initial 3, transfer_mean true, transfer_weight 0.5,
// transfer_strength 4; metric_outputs [], metric_output_points 100, static_features [], roofline_mean false,
// alignment_features false.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "kforge/acquisition.hpp"
#include "kforge/gp.hpp"
#include "kforge/random.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transfer.hpp"

namespace kf::strategies {

struct bayesian_options {
  std::size_t initial_samples = 10;
  std::string acquisition = "log_ei";
  double beta = 2.0;
  double xi = 0.0;
  std::string kernel = "matern52";
  std::size_t refit_every = 8;
  std::size_t max_points = 400;
  std::size_t max_candidates = 20000;
  double failure_penalty = 1.0;
  int restarts = 2;
  std::string screening = "sparse";  ///< exact | sparse (acquisition::spec::screening)
  std::size_t screen_min_points = 500;
  std::size_t screen_keep = 2048;
  std::size_t inducing_points = 128;
  std::vector<std::string> metric_features;
  std::string metric_inputs = "measured";    ///< measured (where known) | predicted (always)
  std::size_t transfer_initial = 3;          ///< initial configurations taken from the transfer prior's best
  bool transfer_mean = true;                 ///< the transfer prior as the GP's mean function
  double transfer_weight = 0.5;              ///< prior slope b0 = this x the records' log-time spread
  double transfer_strength = 4;              ///< pseudo-observations holding the slope at b0
  std::vector<std::string> metric_outputs;   ///< auxiliary outputs of a multi-output GP
  std::size_t metric_output_points = 100;    ///< auxiliary rows per metric at most
  std::vector<std::string> static_features;  ///< inputs known before running (from transfer records)
  bool roofline_mean = false;                ///< a roofline-shaped mean function
  bool alignment_features = false;           ///< is-a-power-of-two inputs (power_of_two_params)
};

class bayesian {
 public:
  explicit bayesian(bayesian_options o = {}) : opt_(std::move(o)) {}

  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state& s, std::span<const trial> done);
  void set_transfer(std::shared_ptr<const transfer_data> t);

  /// The fitted model (null before the initial design is complete): for hybrid strategies and tests.
  /// With a transfer prior mean it models log(time) - prior_mean(x).
  const gp* model() const noexcept { return model_.get(); }
  /// The prior mean of log(time) at c the model sits on: the transfer term (0 without transfer or
  /// with transfer_mean off) plus the roofline term (0 unless roofline_mean).
  double prior_mean(const config& c) const;
  /// prior_mean of many configurations at once (rows of `encoded` are their encodings).
  Eigen::VectorXd prior_means(const std::vector<config>& cfgs, const Eigen::MatrixXd& encoded) const;
  /// True when the model sits on a prior mean (transfer or roofline).
  bool has_prior_mean() const noexcept;
  /// The transfer prior (empty without transfer data).
  const transfer_prior& prior() const noexcept { return prior_; }
  /// The smallest observed log(time); +inf before the first success.
  double best_log_time() const;
  /// Encodes a configuration the way the model sees it (metric features predicted).
  Eigen::VectorXd encode(const config& c) const;
  /// Length of encode()'s result (valid after initialize).
  std::size_t input_dimension() const noexcept { return dim_; }
  /// Brings the model up to date with every observation (refit or append).
  void update_model();

 private:
  struct observation {
    config cfg;
    double log_time;              // NaN: failed
    std::vector<double> metrics;  // raw values of opt_.metric_features (NaN: not measured)
    std::vector<double> outputs;  // raw values of opt_.metric_outputs (NaN: not measured)
    double bytes, instructions;   // DRAM bytes and executed instructions (NaN: not measured)
  };
  // Multi-output GP: how a metric's raw value becomes a target on log(time)'s scale.
  struct output_scale {
    bool ready = false, log = false;
    double mean = 0, sd = 1, sign = 1;
  };
  void update_output_scales();
  double output_target(std::size_t k, double raw) const;
  Eigen::RowVectorXd output_row(const observation& o, std::size_t k) const;
  std::vector<output_scale> output_scale_;
  double time_mean_ = 0, time_sd_ = 1;
  std::size_t task_offset_ = 0, static_offset_ = 0;  // first task coordinate, first static feature
  // Static features: values per configuration from the transfer records, and their ranges.
  void load_static_features();
  double static_feature(std::size_t k, const config& c) const;  // scaled to [0, 1]; 0.5 when unknown
  std::vector<std::map<config, double>> static_values_;
  std::vector<std::pair<double, double>> static_range_;
  std::vector<bool> static_log_;
  // Roofline mean: auxiliary GPs for log10(1 + bytes) and log10(1 + instructions), the fitted ratio
  // and coefficients.
  void fit_roofline(const std::vector<double>& residual_targets);
  Eigen::VectorXd roofline_terms(const Eigen::MatrixXd& encoded) const;
  std::unique_ptr<gp> roof_models_[2];
  double roof_log_ratio_ = 0, roof_a_ = 0, roof_b_ = 0;
  bool roof_ready_ = false;
  /// The runtime model's input for a configuration: its encoding, then the (scaled) metrics, measured
  /// where `measured` is given and finite, predicted otherwise.
  Eigen::RowVectorXd features(const config& c, const std::vector<double>* measured) const;
  void update_metric_models();
  double scale_metric(std::size_t k, double raw) const;
  std::vector<std::unique_ptr<gp>> metric_models_;
  std::vector<std::pair<double, double>> metric_range_;  // (lo, hi) of the transformed values
  std::vector<bool> metric_log_;
  std::vector<std::size_t> candidates(const search_state& s, const std::vector<config>& taken);
  /// Indices into obs_ of the `k` fastest observations (failures last; ties in observation order).
  std::vector<std::size_t> best_observations(std::size_t k) const;
  /// A space too large to enumerate: the unseen one-parameter neighbours of the five best configurations
  /// and up to `max_candidates` uniform draws (distinct, unseen, not in `taken`).
  std::vector<config> sampled_candidates(const search_state& s, const std::vector<config>& taken);
  /// The worst log(time) observed; -inf before the first success.
  double worst_log_time() const;
  /// The training window's inputs, and its targets in `y` (a failure's target is `fail`).
  Eigen::MatrixXd training_inputs(double fail, std::vector<double>& y) const;

  bayesian_options opt_;
  rng rng_{0};
  const search_space* space_ = nullptr;
  std::size_t dim_ = 0;
  // The configuration's own inputs: the space's encoding, then one 0/1 input per aligned parameter
  // (whether its value is a power of two). base_dim_ = their count; metric and static inputs follow.
  void encode_base(const config& c, std::span<double> row) const;
  std::vector<std::size_t> aligned_params_;
  std::size_t base_dim_ = 0;
  bool enumerated_ = false;
  Eigen::MatrixXd encoded_;  // every valid configuration, row = its index in the valid set
  std::vector<observation> obs_;
  std::unique_ptr<gp> model_;
  std::size_t modelled_ = 0;   // observations in the model
  std::size_t fitted_at_ = 0;  // observations at the last hyperparameter fit
  std::size_t built_at_ = 0;   // observations when the training window was last rebuilt
  double penalty_value_ = 0;   // the failure target used at the last (re)build

  // Transfer: the records, their prior, and the prior mean's coefficients (refitted at each rebuild).
  void fit_prior_mean(double fail);
  std::shared_ptr<const transfer_data> transfer_;
  transfer_prior prior_;
  double prior_a_ = 0, prior_b_ = 0;
};

void register_bayesian();

}  // namespace kf::strategies
