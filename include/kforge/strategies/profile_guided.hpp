// Strategy "profile": counter-guided search after KTT's profile-based searcher (Filipovic et al., JPDC 160,
// 2022), with Gaussian processes as the counter models.
//
// From the counters of the best configuration so far it scores bottlenecks in [0, 1]: memory (DRAM
// throughput % of peak), occupancy (1 - achieved occupancy), instruction issue (the rest). Candidates are
// the unvisited configurations one or two parameters away from the best, plus random ones; each gets
//   score = w_mem * (fewer predicted DRAM bytes) + w_occ * (higher predicted occupancy)
//         + w_inst * (fewer predicted instructions)          (relative changes, clipped to [-1, 1])
// with the counters predicted by one GP per counter from the configuration. Candidates scoring below
// `cutoff` are dropped and the next one is drawn with probability proportional to (score - cutoff)^power.
// Without counters (spaces recorded without profiling) every score is 0 and it is a randomised local
// search around the best. Counter names: Nsight/CUPTI names as the cuda evaluator and KTT record them
// (DRAM bytes: dram__bytes_{read,write}.sum or dram__sectors_{read,write}.sum).
// Options (defaults): initial_samples 10, random_candidates 100, cutoff -0.25, power 8, refit_every 8.
#pragma once

#include <memory>

#include "kforge/gp.hpp"
#include "kforge/strategy.hpp"

namespace kf::strategies {

struct profile_options {
  std::size_t initial_samples = 10;
  std::size_t random_candidates = 100;
  double cutoff = -0.25;
  double power = 8;
  std::size_t refit_every = 8;
};

class profile_guided {
 public:
  explicit profile_guided(profile_options o = {}) : opt_(o) {}
  void initialize(const search_space& space, std::uint64_t seed);
  std::vector<config> propose(const search_state& s, std::size_t n);
  void observe(const search_state& s, std::span<const trial> done);

 private:
  enum counter { dram_bytes, occupancy, instructions, dram_pct, n_counters };
  struct obs {
    config cfg;
    double time;  // inf: failed
    double c[n_counters];
  };
  void refit();
  profile_options opt_;
  rng rng_{0};
  const search_space* space_ = nullptr;
  std::vector<obs> obs_;
  std::unique_ptr<gp> models_[n_counters];
  std::size_t fitted_at_ = 0;
};

void register_profile_guided();

}  // namespace kf::strategies
