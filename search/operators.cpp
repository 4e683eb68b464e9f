// Bottleneck-guided operators: see include/kforge/strategies/operators.hpp.
#include "kforge/strategies/operators.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <string>

#include "kforge/strategies/genetic.hpp"

namespace kf::strategies {

std::string_view to_string(bottleneck b) noexcept {
  switch (b) {
    case bottleneck::memory:
      return "memory";
    case bottleneck::occupancy:
      return "occupancy";
    case bottleneck::latency:
      return "latency";
    case bottleneck::compute:
      return "compute";
    case bottleneck::unknown:
      break;
  }
  return "unknown";
}

std::string_view to_string(operator_family f) noexcept {
  switch (f) {
    case operator_family::parallelism:
      return "parallelism";
    case operator_family::coarsening:
      return "coarsening";
    case operator_family::vectorisation:
      return "vectorisation";
    case operator_family::unrolling:
      return "unrolling";
    case operator_family::memory:
      return "memory";
    case operator_family::registers:
      return "registers";
    case operator_family::other:
      break;
  }
  return "other";
}

namespace {

// The first metric of `names` the trial has, or nullopt.
std::optional<double> first_metric(const trial& t, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const auto v = t.metric(n); v && std::isfinite(*v)) return v;
  return std::nullopt;
}

}  // namespace

bottleneck classify_bottleneck(const trial& t) {
  if (!t.ok()) return bottleneck::unknown;
  const auto dram = first_metric(t, {"dram__throughput.avg.pct_of_peak_sustained_elapsed"});
  const auto l2 = first_metric(t, {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                                   "lts__throughput.avg.pct_of_peak_sustained_elapsed"});
  const auto sm = first_metric(t, {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                   "smsp__issue_active.avg.pct_of_peak_sustained_active",
                                   "smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"});
  auto occupancy = first_metric(t, {"sm__warps_active.avg.pct_of_peak_sustained_active"});
  if (!occupancy)
    if (const auto s = first_metric(t, {"static.occupancy"})) occupancy = 100.0 * *s;
  const auto spills = first_metric(t, {"static.spill_stores_bytes", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"});
  if (!dram && !l2 && !sm && !occupancy) return bottleneck::unknown;
  if (std::max(dram.value_or(0), l2.value_or(0)) >= 60) return bottleneck::memory;
  if ((occupancy && *occupancy < 50) || (spills && *spills > 0)) return bottleneck::occupancy;
  if (sm && *sm >= 60) return bottleneck::compute;
  return bottleneck::latency;
}

std::vector<operator_family> parameter_families(const search_space& space) {
  // Keywords by family, in the order they are tried (the first family with a match wins).
  struct rule {
    operator_family family;
    std::vector<std::string> keywords;
  };
  static const std::vector<rule> rules = {
      {operator_family::registers, {"maxrreg", "maxreg", "launch_bound", "min_blocks", "blocks_per_sm", "reg_cap"}},
      {operator_family::vectorisation, {"vec", "vw", "vector", "float4", "simd"}},
      {operator_family::unrolling, {"unroll", "kwi"}},
      {operator_family::coarsening, {"tile", "per_thread", "wpt", "coarse", "items", "work", "elements", "kwg"}},
      {operator_family::parallelism,
       {"block", "thread", "warp", "group", "local_size", "mdimc", "ndimc", "mwg", "nwg", "grid"}},
      {operator_family::memory,
       {"shared", "smem", "shmem", "cache", "read_only", "readonly", "pad", "stage", "pipeline", "prefetch", "local",
        "texture", "stride", "layout"}},
  };
  std::vector<operator_family> out;
  for (const auto& p : space.params()) {
    std::string name = p.name;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    operator_family f = operator_family::other;
    for (const auto& r : rules)
      if (std::any_of(r.keywords.begin(), r.keywords.end(),
                      [&](const std::string& k) { return name.find(k) != std::string::npos; })) {
        f = r.family;
        break;
      }
    out.push_back(f);
  }
  return out;
}

operator_bandit::operator_bandit(const search_space& space, double prior_strength)
    : family_of_(parameter_families(space)) {
  for (std::size_t i = 0; i < family_of_.size(); ++i)
    if (space.params()[i].values.size() > 1) genes_[static_cast<std::size_t>(family_of_[i])].push_back(i);
  for (auto& a : alpha_)
    a.fill(1.0);
  for (auto& b : beta_)
    b.fill(1.0);
  // The expert biases, as pseudo-successes: what usually helps a variant with this bottleneck.
  const auto favour = [&](bottleneck b, std::initializer_list<operator_family> fs) {
    for (const auto f : fs)
      alpha_[static_cast<std::size_t>(b)][static_cast<std::size_t>(f)] += prior_strength;
  };
  favour(bottleneck::memory, {operator_family::vectorisation, operator_family::coarsening, operator_family::memory});
  favour(bottleneck::occupancy, {operator_family::parallelism, operator_family::registers});
  favour(bottleneck::latency, {operator_family::coarsening, operator_family::unrolling, operator_family::memory});
  favour(bottleneck::compute, {operator_family::unrolling, operator_family::coarsening});
}

namespace {

// Gamma(shape, 1) by Marsaglia and Tsang (shape < 1 through the boost u^(1/shape)).
double gamma_draw(double shape, rng& r) {
  if (shape < 1.0) {
    const double u = std::max(r.uniform(), 1e-300);
    return gamma_draw(shape + 1.0, r) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = r.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = r.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(std::max(u, 1e-300)) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double beta_draw(double a, double b, rng& r) {
  const double x = gamma_draw(a, r), y = gamma_draw(b, r);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace

std::optional<operator_family> operator_bandit::choose(bottleneck b, rng& r) const {
  std::optional<operator_family> best;
  double best_draw = -1;
  const auto bi = static_cast<std::size_t>(b);
  for (std::size_t f = 0; f < family_count; ++f) {
    if (genes_[f].empty()) continue;
    const double draw = beta_draw(alpha_[bi][f], beta_[bi][f], r);
    if (draw > best_draw) {
      best_draw = draw;
      best = static_cast<operator_family>(f);
    }
  }
  return best;
}

void operator_bandit::reward(bottleneck b, operator_family f, bool improved) {
  auto& cell = improved ? alpha_ : beta_;
  cell[static_cast<std::size_t>(b)][static_cast<std::size_t>(f)] += 1.0;
}

double operator_bandit::success_rate(bottleneck b, operator_family f) const {
  const auto bi = static_cast<std::size_t>(b), fi = static_cast<std::size_t>(f);
  return alpha_[bi][fi] / (alpha_[bi][fi] + beta_[bi][fi]);
}

config operator_bandit::mutate(const search_space& space, const config& parent, operator_family f, rng& r) const {
  config c = parent;
  std::vector<std::size_t> genes = genes_[static_cast<std::size_t>(f)];
  if (genes.empty()) return c;
  r.shuffle(std::span<std::size_t>(genes));
  const std::size_t changes = genes.size() > 1 && r.bernoulli(0.3) ? 2 : 1;
  const auto params = space.params();
  for (std::size_t k = 0; k < changes; ++k) {
    const std::size_t i = genes[k];
    const auto n = static_cast<std::uint32_t>(params[i].values.size());
    if (params[i].ordered && r.bernoulli(0.5)) {
      c[i] = c[i] == 0 ? 1 : (c[i] + 1 == n ? n - 2 : (r.bernoulli(0.5) ? c[i] + 1 : c[i] - 1));
    } else {
      const auto v = static_cast<std::uint32_t>(r.index(n - 1));
      c[i] = v >= c[i] ? v + 1 : v;
    }
  }
  if (space.is_valid(c)) return c;
  // Repair within the family first (another value of one of its genes), then anywhere.
  for (const auto i : genes) {
    const auto orig = c[i];
    std::vector<std::uint32_t> fixes;
    for (std::uint32_t v = 0; v < params[i].values.size(); ++v) {
      if (v == orig) continue;
      c[i] = v;
      if (space.is_valid(c) && c != parent) fixes.push_back(v);
    }
    if (!fixes.empty()) {
      c[i] = fixes[r.index(fixes.size())];
      return c;
    }
    c[i] = orig;
  }
  if (repair_config(space, c, r)) return c;
  return parent;
}

}  // namespace kf::strategies
