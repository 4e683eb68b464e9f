// kf::transfer_data: what other runs of the same kernel measured (other GPUs, other shapes), bound to
// this run's space, for strategies that start from it ("a head start from other records").
//
// An experiment names the recordings (`transfer: [recording, ...]`, docs/transfer.md); kforge loads
// them, keeps the records whose configuration belongs to this run's space, and hands the result to the
// strategy before the run (kf::strategy::set_transfer). Contract for strategies: transfer data is
// read-only prior knowledge; it never counts as an evaluation, never enters the history, and a
// strategy must still propose only valid, unseen configurations. Every use of it is deterministic (the
// same records and seed give the same run).
//
// kf::transfer_prior turns the records into one number per configuration: its rank among each
// source's successful times as a normal score, averaged over the sources that hold it (lower =
// faster elsewhere). Ranks, not times: GPUs differ in scale and spread (median/optimum 1.1 to 30 on
// benchmark_hub), while the order of configurations is what carries over.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/space.hpp"

namespace kf {

struct transfer_source {
  std::string file;    ///< the recording, as given (resolved)
  std::string device;  ///< as the recording names it (may be empty)
  std::vector<config> configs;                                      ///< configurations of this space it holds, sorted
  std::vector<double> time_ms;                                      ///< their recorded times; +inf: failed there
  std::vector<std::map<std::string, double, std::less<>>> metrics;  ///< their recorded metrics
  std::size_t unmatched = 0;  ///< records whose configuration is not in this space
};

struct transfer_data {
  std::vector<transfer_source> sources;
  bool empty() const noexcept { return sources.empty(); }
};

/// Loads the recordings (Kernel Tuner cache, T4 or KTT output) and binds them to `space`. A file that
/// cannot be read, or that holds no successful configuration of the space, is a kf::error naming it.
transfer_data load_transfer(const std::vector<std::string>& files, const search_space& space);

/// The prior score of every configuration the sources hold (see the header comment).
class transfer_prior {
 public:
  transfer_prior() = default;
  explicit transfer_prior(const transfer_data& data);

  bool empty() const noexcept { return score_.empty(); }
  /// The prior score of c (about N(0, 1) over a source's configurations; failures score above every
  /// success); nullopt when no source holds c.
  std::optional<double> score(const config& c) const;
  /// The configurations held, best prior first (ties: the lower configuration first).
  const std::vector<config>& ranked() const noexcept { return ranked_; }
  /// Mean over the sources of the standard deviation of log(time) of their successful records: the
  /// scale of log(time) differences the prior's scores stand for.
  double log_time_spread() const noexcept { return spread_; }

 private:
  std::map<config, double> score_;
  std::vector<config> ranked_;
  double spread_ = 1.0;
};

}  // namespace kf
