#include "kforge/space.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <stdexcept>

#include "kforge/error.hpp"
#include "kforge/options.hpp"

namespace kf {

std::size_t config_hash::operator()(const config& c) const noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (auto i : c)
    h = (h ^ i) * 0x100000001b3ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

std::string_view to_string(param_type t) noexcept {
  switch (t) {
    case param_type::integer:
      return "int";
    case param_type::real:
      return "float";
    case param_type::boolean:
      return "bool";
    case param_type::string:
      return "string";
  }
  return "?";
}

param make_param(std::string name, param_type type, std::vector<value> values) {
  param p;
  p.name = std::move(name);
  p.type = type;
  p.ordered = type != param_type::string;
  if (values.empty()) throw error("parameter '" + excerpt(p.name, 100) + "' has no values");
  p.values.reserve(values.size());
  for (auto& v : values) {
    auto bad = [&](const char* what) {
      throw error("parameter '" + p.name + "' of type " + std::string(to_string(type)) + ": value " +
                  v.repr() + " " + what);
    };
    switch (type) {
      case param_type::integer:
        if (v.is_integral()) {
          p.values.emplace_back(v.as_int());
        } else if (v.is_real() && std::isfinite(v.as_real()) && std::floor(v.as_real()) == v.as_real() &&
                   std::fabs(v.as_real()) < 9.0e18) {
          p.values.emplace_back(static_cast<std::int64_t>(v.as_real()));
        } else {
          bad("is not an integer");
        }
        break;
      case param_type::real:
        if (!v.is_number()) bad("is not a number");
        p.values.emplace_back(v.as_real());
        break;
      case param_type::boolean:
        if (v.is_bool()) {
          p.values.push_back(v);
        } else if (v.is_integral() && (v.as_int() == 0 || v.as_int() == 1)) {
          p.values.emplace_back(v.as_int() == 1);
        } else {
          bad("is not a bool (True/False or 0/1)");
        }
        break;
      case param_type::string:
        // Strings stay strings; other scalars are accepted as they are (an enum of mixed values).
        if (v.is_list() || v.is_none()) bad("is not a scalar");
        p.values.push_back(v);
        break;
    }
  }
  for (std::size_t i = 0; i < p.values.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (p.values[i] == p.values[j] && p.values[i].type() == p.values[j].type())
        throw error("parameter '" + p.name + "' lists the value " + p.values[i].repr() + " twice");
  return p;
}

// ------------------------------------------------------------------------------------------------
valid_set::valid_set(std::vector<std::uint64_t> sorted_ranks, std::vector<std::uint32_t> radices)
    : ranks_(std::move(sorted_ranks)), radices_(std::move(radices)), strides_(radices_.size(), 1) {
  for (std::size_t i = radices_.size(); i-- > 1;)
    strides_[i - 1] = strides_[i] * radices_[i];
}

valid_set valid_set::all(std::vector<std::uint32_t> radices) {
  valid_set v({}, std::move(radices));
  v.dense_ = true;
  v.dense_size_ = 1;
  for (auto r : v.radices_)
    if (__builtin_mul_overflow(v.dense_size_, std::size_t{r}, &v.dense_size_) || v.dense_size_ >> 63)
      throw error("valid_set::all: more than 2^63 combinations");
  return v;
}

config valid_set::at(std::size_t i) const {
  if (i >= size())
    throw std::out_of_range("valid_set::at: " + std::to_string(i) + " of " + std::to_string(size()));
  config c(radices_.size());
  decode(rank(i), c);
  return c;
}

void valid_set::decode(std::uint64_t rank, std::span<std::uint32_t> out) const noexcept {
  for (std::size_t i = 0; i < radices_.size(); ++i) {
    out[i] = static_cast<std::uint32_t>(rank / strides_[i]);
    rank %= strides_[i];
  }
}

std::uint64_t valid_set::rank_of(std::span<const std::uint32_t> c) const noexcept {
  std::uint64_t r = 0;
  for (std::size_t i = 0; i < radices_.size(); ++i)
    r += c[i] * strides_[i];
  return r;
}

std::optional<std::size_t> valid_set::index_of(std::span<const std::uint32_t> c) const noexcept {
  if (c.size() != radices_.size()) return std::nullopt;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c[i] >= radices_[i]) return std::nullopt;
  const auto r = rank_of(c);
  if (dense_) return static_cast<std::size_t>(r);
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), r);
  if (it == ranks_.end() || *it != r) return std::nullopt;
  return static_cast<std::size_t>(it - ranks_.begin());
}

// ------------------------------------------------------------------------------------------------
namespace {
struct slot_binding {
  std::size_t param = 0;            // when constant == nullptr
  const value* constant = nullptr;  // points into impl::constants
};
struct compiled_constraint {
  std::string source;
  expression expr;
  std::vector<slot_binding> slots;
  std::vector<std::size_t> params;  // distinct parameters used
};
}  // namespace

struct search_space::impl {
  std::vector<param> params;
  std::vector<std::string> constraint_sources;
  std::map<std::string, value> constants;
  std::vector<compiled_constraint> constraints;
  std::vector<std::uint32_t> radices;
  std::size_t encoded_dim = 0;
  std::vector<std::size_t> encode_offset;

  std::shared_ptr<const valid_set> explicit_valid;  // set by restricted_to()
  mutable std::once_flag enum_once;
  mutable std::unique_ptr<valid_set> valid;
  mutable std::atomic<const valid_set*> ready{nullptr};  // published after `valid` is complete
  mutable std::string enum_error;
  mutable enumeration_stats stats;
  mutable std::once_flag estimate_once;
  mutable double estimated_valid = 0;  // valid_if_enumerable's upper estimate of the valid count

  // Whether `c` satisfies `cc`. A constraint that raises counts as violated (or rethrows when
  // throw_on_error); it then adds one to *errors and, when *first_error is empty, describes the
  // expression, the values it was given and why it raised.
  bool eval(const compiled_constraint& cc, std::span<const std::uint32_t> c, bool throw_on_error,
            std::uint64_t* errors, std::string* first_error) const {
    const value* slots[64];
    std::vector<const value*> heap_slots;
    const value** s = slots;
    if (cc.slots.size() > 64) {
      heap_slots.resize(cc.slots.size());
      s = heap_slots.data();
    }
    for (std::size_t i = 0; i < cc.slots.size(); ++i) {
      const auto& b = cc.slots[i];
      s[i] = b.constant ? b.constant : &params[b.param].values[c[b.param]];
    }
    try {
      return cc.expr.test(std::span<const value* const>(s, cc.slots.size()));
    } catch (const error& e) {
      if (throw_on_error) throw;
      if (errors) ++*errors;
      if (first_error && first_error->empty()) *first_error = describe_raise(cc, c, e);
      return false;
    }
  }

  // "constraint 'a / b > 1' raised at {a=4, b=0}: division by zero" (one line, bounded).
  std::string describe_raise(const compiled_constraint& cc, std::span<const std::uint32_t> c,
                             const error& e) const {
    std::string at;
    for (auto p : cc.params)
      at += (at.empty() ? "" : ", ") + excerpt(params[p].name, 60) + "=" +
            excerpt(params[p].values[c[p]].repr(), 60);
    const auto* ee = dynamic_cast<const eval_error*>(&e);
    std::string why = ee ? ee->reason() : e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');
    return "constraint '" + excerpt(cc.source, 200) + "' raised at {" + at + "}: " + excerpt(why, 200);
  }

  void enumerate() const;
};

namespace {
// Orders parameters so that constraints are completed as early as possible, which lets the
// enumeration prune early. Parameters that no constraint mentions come last.
std::vector<std::size_t> enumeration_order(const std::vector<param>& params,
                                           const std::vector<compiled_constraint>& constraints) {
  const std::size_t d = params.size();
  std::vector<bool> placed(d, false);
  std::vector<std::size_t> order;
  std::vector<std::size_t> uses(d, 0);
  for (const auto& cc : constraints)
    for (auto p : cc.params)
      ++uses[p];
  while (order.size() < d) {
    std::size_t best = d;
    std::tuple<std::size_t, long, long, long> best_score{};
    for (std::size_t p = 0; p < d; ++p) {
      if (placed[p] || uses[p] == 0) continue;
      std::size_t completes = 0;
      long smallest_remaining = 1 << 20;
      for (const auto& cc : constraints) {
        if (std::find(cc.params.begin(), cc.params.end(), p) == cc.params.end()) continue;
        long remaining = 0;
        for (auto q : cc.params)
          remaining += !placed[q];
        if (remaining == 1) ++completes;
        smallest_remaining = std::min(smallest_remaining, remaining);
      }
      auto score = std::make_tuple(completes, -smallest_remaining, static_cast<long>(uses[p]),
                                   -static_cast<long>(params[p].values.size()));
      if (best == d || score > best_score) {
        best = p;
        best_score = score;
      }
    }
    if (best == d) {
      for (std::size_t p = 0; p < d; ++p)
        if (!placed[p]) best = p, p = d;
    }
    placed[best] = true;
    order.push_back(best);
  }
  return order;
}
}  // namespace

void search_space::impl::enumerate() const {
  const auto t0 = std::chrono::steady_clock::now();
  if (explicit_valid) {
    valid = std::make_unique<valid_set>(*explicit_valid);
    for (auto r : radices)
      stats.cartesian_size = (stats.cartesian_size == 0 ? 1 : stats.cartesian_size) * r;
    return;
  }
  const std::size_t d = params.size();
  double cart = 1;
  for (auto r : radices)
    cart *= r;
  stats.cartesian_size = cart;
  if (cart > 9.2e18) {
    enum_error = "the space has " + std::to_string(cart) + " combinations, too many to enumerate";
    return;
  }
  if (constraints.empty() && d > 0) {  // every combination is valid: nothing to enumerate or store
    valid = std::make_unique<valid_set>(valid_set::all(radices));
    return;
  }
  const auto order = enumeration_order(params, constraints);
  // For each depth, the constraints whose parameters are all bound once order[depth] is.
  std::vector<std::vector<std::size_t>> at_depth(d + 1);
  {
    std::vector<std::size_t> pos(d);
    for (std::size_t k = 0; k < d; ++k)
      pos[order[k]] = k;
    for (std::size_t ci = 0; ci < constraints.size(); ++ci) {
      std::size_t depth = 0;
      bool any = false;
      for (auto p : constraints[ci].params)
        depth = std::max(depth, pos[p]), any = true;
      at_depth[any ? depth + 1 : 0].push_back(ci);
    }
  }
  std::vector<std::uint64_t> strides(d, 1);
  for (std::size_t i = d; i-- > 1;)
    strides[i - 1] = strides[i] * radices[i];

  std::atomic<std::uint64_t> nodes{0}, evals{0}, errors{0};
  std::string first_error;

  // Configurations below depth k of the order (a constraint that raises there removes that many).
  std::vector<double> below(d + 1, 1);
  for (std::size_t k = d; k-- > 0;)
    below[k] = below[k + 1] * radices[order[k]];
  double raised = 0;  // configurations removed because a constraint raised (serial parts)

  // Constant constraints (no parameters): decide the whole space.
  {
    config empty(d, 0);
    for (auto ci : at_depth[0]) {
      ++evals;
      std::uint64_t e = 0;
      std::string msg;
      if (!eval(constraints[ci], empty, false, &e, &msg)) {
        errors += e;
        if (!msg.empty()) first_error = msg;
        if (e) raised = cart;
        valid = std::make_unique<valid_set>(std::vector<std::uint64_t>{}, radices);
        stats.constraint_evaluations = evals;
        stats.constraint_errors = errors;
        stats.raised_configurations = raised;
        stats.first_error = first_error;
        return;
      }
    }
  }

  // Expand a prefix of the order serially until there is enough parallel work.
  std::size_t split = 0;
  double prefix_count = 1;
  while (split < d && prefix_count < 256)
    prefix_count *= radices[order[split++]];

  std::vector<config> prefixes;
  {
    config c(d, 0);
    std::function<void(std::size_t)> rec = [&](std::size_t k) {
      if (k == split) {
        prefixes.push_back(c);
        return;
      }
      const auto p = order[k];
      for (std::uint32_t v = 0; v < radices[p]; ++v) {
        c[p] = v;
        ++nodes;
        bool ok = true;
        for (auto ci : at_depth[k + 1]) {
          ++evals;
          std::uint64_t e = 0;
          std::string msg;
          if (!eval(constraints[ci], c, false, &e, &msg)) {
            ok = false;
            if (e) {
              errors += e;
              raised += below[k + 1];
              if (first_error.empty()) first_error = msg;
            }
            break;
          }
        }
        if (ok) rec(k + 1);
      }
      c[p] = 0;
    };
    rec(0);
  }

  std::vector<std::vector<std::uint64_t>> chunks(prefixes.size());
  // Per prefix: the first raise below it and the configurations raises removed, so that the reported
  // first raise is the first in enumeration order whatever the threads' timing.
  std::vector<std::string> chunk_first_error(prefixes.size());
  std::vector<double> chunk_raised(prefixes.size(), 0);
  std::atomic<std::size_t> total{0};
  std::atomic<bool> too_many{false};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, prefixes.size()), [&](const auto& range) {
    for (std::size_t i = range.begin(); i != range.end(); ++i) {
      config c = prefixes[i];
      auto& out = chunks[i];
      std::uint64_t local_nodes = 0, local_evals = 0, local_errors = 0;
      std::string& local_first = chunk_first_error[i];
      // Iterative DFS over order[split..d).
      std::vector<std::uint32_t> next(d, 0);
      std::size_t k = split;
      if (k == d) {
        // The prefix is a full configuration.
        std::uint64_t r = 0;
        for (std::size_t j = 0; j < d; ++j)
          r += c[j] * strides[j];
        out.push_back(r);
      } else {
        while (true) {
          if (too_many.load(std::memory_order_relaxed)) break;
          const auto p = order[k];
          if (next[k] >= radices[p]) {
            c[p] = 0;
            if (k == split) break;
            --k;
            continue;
          }
          c[p] = next[k]++;
          ++local_nodes;
          bool ok = true;
          for (auto ci : at_depth[k + 1]) {
            ++local_evals;
            const auto errors_before = local_errors;
            if (!eval(constraints[ci], c, false, &local_errors, &local_first)) {
              if (local_errors != errors_before) chunk_raised[i] += below[k + 1];
              ok = false;
              break;
            }
          }
          if (!ok) continue;
          if (k + 1 == d) {
            std::uint64_t r = 0;
            for (std::size_t j = 0; j < d; ++j)
              r += c[j] * strides[j];
            out.push_back(r);
          } else {
            ++k;
            next[k] = 0;
          }
        }
      }
      nodes += local_nodes;
      evals += local_evals;
      errors += local_errors;
      if (total.fetch_add(out.size()) + out.size() > max_valid_configs()) too_many = true;
    }
  });
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    raised += chunk_raised[i];
    if (first_error.empty()) first_error = std::move(chunk_first_error[i]);
  }
  stats.nodes_visited = nodes;
  stats.constraint_evaluations = evals;
  stats.constraint_errors = errors;
  stats.raised_configurations = raised;
  stats.first_error = first_error;
  if (too_many) {
    enum_error =
        "more than " + std::to_string(max_valid_configs()) + " valid configurations, too many to enumerate";
    return;
  }
  std::vector<std::uint64_t> ranks;
  ranks.reserve(total);
  for (auto& ch : chunks)
    ranks.insert(ranks.end(), ch.begin(), ch.end());
  std::sort(ranks.begin(), ranks.end());
  valid = std::make_unique<valid_set>(std::move(ranks), radices);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ------------------------------------------------------------------------------------------------
search_space::search_space() : search_space(std::vector<param>{}, {}) {}
search_space::~search_space() = default;
search_space::search_space(const search_space&) = default;
search_space& search_space::operator=(const search_space&) = default;
search_space::search_space(search_space&&) noexcept = default;
search_space& search_space::operator=(search_space&&) noexcept = default;

search_space::search_space(std::vector<param> params, std::vector<std::string> constraints,
                           std::map<std::string, value> constants)
    : impl_(std::make_shared<impl>()) {
  auto& m = *impl_;
  m.params = std::move(params);
  m.constraint_sources = std::move(constraints);
  m.constants = std::move(constants);
  std::set<std::string, std::less<>> names;
  for (const auto& p : m.params) {
    if (p.name.empty()) throw error("a parameter has an empty name");
    if (!names.insert(p.name).second)
      throw error("parameter '" + excerpt(p.name, 100) + "' is declared twice");
    if (p.values.empty()) throw error("parameter '" + excerpt(p.name, 100) + "' has no values");
    if (p.values.size() > std::numeric_limits<std::uint32_t>::max())
      throw error("parameter '" + p.name + "' has too many values");
    m.radices.push_back(static_cast<std::uint32_t>(p.values.size()));
  }
  for (const auto& [name, v] : m.constants)
    if (names.count(name)) throw error("'" + excerpt(name, 100) + "' is both a parameter and a constant");
  for (std::size_t i = 0; i < m.constraint_sources.size(); ++i) {
    const auto& src = m.constraint_sources[i];
    compiled_constraint cc;
    cc.source = src;
    try {
      cc.expr = expression::parse(src);
    } catch (const error& e) {
      throw error("constraint " + std::to_string(i + 1) + " '" + excerpt(src, 200) + "': " + e.what());
    }
    for (const auto& n : cc.expr.free_names()) {
      slot_binding b;
      if (auto pi = param_index(n)) {
        b.param = *pi;
        if (std::find(cc.params.begin(), cc.params.end(), *pi) == cc.params.end()) cc.params.push_back(*pi);
      } else if (auto it = m.constants.find(n); it != m.constants.end()) {
        b.constant = &it->second;
      } else {
        const auto pos = src.find(n);
        throw error("constraint " + std::to_string(i + 1) + " '" + excerpt(src, 200) + "': unknown name '" +
                    excerpt(n, 100) + "' (not a parameter or constant)\n" +
                    caret_excerpt(src, pos == std::string::npos ? 0 : pos));
      }
      cc.slots.push_back(b);
    }
    m.constraints.push_back(std::move(cc));
  }
  for (const auto& p : m.params) {
    m.encode_offset.push_back(m.encoded_dim);
    m.encoded_dim += p.ordered ? 1 : p.values.size();
  }
}

std::span<const param> search_space::params() const noexcept {
  return impl_->params;
}
std::span<const std::string> search_space::constraint_sources() const noexcept {
  return impl_->constraint_sources;
}
const std::map<std::string, value>& search_space::constants() const noexcept {
  return impl_->constants;
}

std::optional<std::size_t> search_space::param_index(std::string_view name) const noexcept {
  const auto& ps = impl_->params;
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (ps[i].name == name) return i;
  return std::nullopt;
}

double search_space::cartesian_size() const noexcept {
  double c = 1;
  for (auto r : impl_->radices)
    c *= r;
  return c;
}

bool search_space::is_valid(std::span<const std::uint32_t> c) const {
  const auto& m = *impl_;
  if (c.size() != m.params.size()) return false;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c[i] >= m.radices[i]) return false;
  if (m.explicit_valid) return m.explicit_valid->index_of(c).has_value();
  if (const auto* vs = m.ready.load(std::memory_order_acquire)) return vs->index_of(c).has_value();
  for (const auto& cc : m.constraints)
    if (!m.eval(cc, c, false, nullptr, nullptr)) return false;
  return true;
}

bool search_space::check(std::span<const std::uint32_t> c) const {
  const auto& m = *impl_;
  if (m.explicit_valid) return is_valid(c);
  if (c.size() != m.params.size())
    throw error("configuration has " + std::to_string(c.size()) + " values, the space " +
                std::to_string(m.params.size()) + " parameters");
  for (const auto& cc : m.constraints)
    if (!m.eval(cc, c, true, nullptr, nullptr)) return false;
  return true;
}

const valid_set& search_space::valid() const {
  std::call_once(impl_->enum_once, [this] {
    impl_->enumerate();
    impl_->ready.store(impl_->valid.get(), std::memory_order_release);
  });
  if (!impl_->valid) throw error(impl_->enum_error);
  return *impl_->valid;
}

const valid_set* search_space::valid_if_enumerable(std::size_t max_valid) const {
  const auto& m = *impl_;
  // Decided by the space alone (its size, the fixed-seed estimate, the enumeration's outcome), never by
  // whether something enumerated it before: a seed's sequence must not depend on that. Past 1e9
  // combinations enumerating could take minutes (a constraint over every parameter is checked at the
  // leaves).
  if (!m.explicit_valid && !m.constraints.empty()) {
    if (cartesian_size() > 1e9) return nullptr;
    // Enumerating a large, loosely constrained space only to find it too big would cost seconds to
    // minutes (and 8 bytes a configuration): estimate the valid count first.
    std::call_once(m.estimate_once, [&] {
      rng r(0x5eed);
      std::size_t hits = 1;
      constexpr std::size_t draws = 1000;
      for (std::size_t i = 0; i < draws; ++i)
        if (is_valid(sample_unconstrained(r))) ++hits;
      m.estimated_valid = cartesian_size() * static_cast<double>(hits) / draws;
    });
    if (m.estimated_valid > static_cast<double>(max_valid)) return nullptr;
  }
  try {
    const auto& vs = valid();
    return vs.size() <= max_valid ? &vs : nullptr;
  } catch (const error&) {
    return nullptr;  // too large to enumerate after all
  }
}

bool search_space::enumerated() const noexcept {
  return impl_->ready.load(std::memory_order_acquire) != nullptr;
}

enumeration_stats search_space::stats() const {
  valid();
  return impl_->stats;
}

config search_space::sample_unconstrained(rng& r) const {
  config c(dimension());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<std::uint32_t>(r.index(impl_->radices[i]));
  return c;
}

config search_space::sample(rng& r, std::size_t max_tries) const {
  if (dimension() == 0) throw error("the search space has no parameters");
  if (const auto* vs = valid_if_enumerable()) {
    if (vs->empty()) throw error("the search space has no valid configuration");
    return vs->at(r.index(vs->size()));
  }
  for (std::size_t t = 0; t < max_tries; ++t) {
    auto c = sample_unconstrained(r);
    if (is_valid(c)) return c;
  }
  throw error("no valid configuration found in " + std::to_string(max_tries) + " random draws");
}

std::vector<config> search_space::neighbours(std::span<const std::uint32_t> c, neighbourhood kind) const {
  const auto& m = *impl_;
  std::vector<config> out;
  config n(c.begin(), c.end());
  const std::size_t d = c.size();
  switch (kind) {
    case neighbourhood::hamming:
      for (std::size_t i = 0; i < d; ++i) {
        for (std::uint32_t v = 0; v < m.radices[i]; ++v) {
          if (v == c[i]) continue;
          n[i] = v;
          if (is_valid(n)) out.push_back(n);
        }
        n[i] = c[i];
      }
      break;
    case neighbourhood::strictly_adjacent:
      for (std::size_t i = 0; i < d; ++i) {
        if (!m.params[i].ordered) {  // no adjacency among unordered values: any other value
          for (std::uint32_t v = 0; v < m.radices[i]; ++v) {
            if (v == c[i]) continue;
            n[i] = v;
            if (is_valid(n)) out.push_back(n);
          }
          n[i] = c[i];
          continue;
        }
        for (int delta : {-1, 1}) {
          const long v = static_cast<long>(c[i]) + delta;
          if (v < 0 || v >= static_cast<long>(m.radices[i])) continue;
          n[i] = static_cast<std::uint32_t>(v);
          if (is_valid(n)) out.push_back(n);
        }
        n[i] = c[i];
      }
      break;
    case neighbourhood::adjacent: {
      // Every combination of per-parameter offsets in {-1, 0, +1} (any value for unordered ones).
      std::function<void(std::size_t, bool)> rec = [&](std::size_t i, bool moved) {
        if (i == d) {
          if (moved && is_valid(n)) out.push_back(n);
          return;
        }
        if (!m.params[i].ordered) {
          for (std::uint32_t v = 0; v < m.radices[i]; ++v) {
            n[i] = v;
            rec(i + 1, moved || v != c[i]);
          }
        } else {
          for (int delta : {-1, 0, 1}) {
            const long v = static_cast<long>(c[i]) + delta;
            if (v < 0 || v >= static_cast<long>(m.radices[i])) continue;
            n[i] = static_cast<std::uint32_t>(v);
            rec(i + 1, moved || delta != 0);
          }
        }
        n[i] = c[i];
      };
      rec(0, false);
      break;
    }
  }
  return out;
}

search_space search_space::restricted_to(std::vector<config> valid_configs) const {
  search_space out(impl_->params, impl_->constraint_sources, impl_->constants);
  double cart = cartesian_size();
  if (cart > 9.2e18) throw error("the space is too large for an explicit valid set");
  std::vector<std::uint64_t> strides(dimension(), 1);
  for (std::size_t i = dimension(); i-- > 1;)
    strides[i - 1] = strides[i] * impl_->radices[i];
  std::vector<std::uint64_t> ranks;
  ranks.reserve(valid_configs.size());
  for (const auto& c : valid_configs) {
    if (c.size() != dimension()) throw error("a configuration of the valid set has the wrong length");
    std::uint64_t r = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i] >= impl_->radices[i]) throw error("a configuration of the valid set is out of range");
      r += c[i] * strides[i];
    }
    ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  out.impl_->explicit_valid = std::make_shared<const valid_set>(std::move(ranks), impl_->radices);
  return out;
}

bool search_space::explicit_valid_set() const noexcept {
  return impl_->explicit_valid != nullptr;
}

std::size_t search_space::encoded_dimension() const noexcept {
  return impl_->encoded_dim;
}

void search_space::encode(std::span<const std::uint32_t> c, std::span<double> out) const {
  const auto& m = *impl_;
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    const auto n = m.radices[i];
    const auto off = m.encode_offset[i];
    if (m.params[i].ordered) {
      out[off] = n > 1 ? static_cast<double>(c[i]) / (n - 1) : 0.5;
    } else {
      for (std::uint32_t v = 0; v < n; ++v)
        out[off + v] = v == c[i] ? 1.0 : 0.0;
    }
  }
}

std::vector<double> search_space::encode(std::span<const std::uint32_t> c) const {
  std::vector<double> out(encoded_dimension());
  encode(c, out);
  return out;
}

std::string search_space::key(std::span<const std::uint32_t> c) const {
  std::string k;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i) k += ',';
    k += impl_->params[i].values[c[i]].str();
  }
  return k;
}

nlohmann::json search_space::to_json(std::span<const std::uint32_t> c) const {
  auto j = nlohmann::json::object();
  for (std::size_t i = 0; i < c.size(); ++i)
    j[impl_->params[i].name] = kf::to_json(impl_->params[i].values[c[i]]);
  return j;
}

std::string search_space::describe(std::span<const std::uint32_t> c) const {
  std::string s = "{";
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i) s += ", ";
    s += impl_->params[i].name + "=" + impl_->params[i].values[c[i]].repr();
  }
  return s + "}";
}

std::optional<std::uint32_t> search_space::value_index(std::size_t p, const value& v) const noexcept {
  const auto& vals = impl_->params[p].values;
  for (std::size_t i = 0; i < vals.size(); ++i)
    if (vals[i] == v) return static_cast<std::uint32_t>(i);
  return std::nullopt;
}

config search_space::from_values(const std::map<std::string, value, std::less<>>& values,
                                 bool allow_extra) const {
  const auto& m = *impl_;
  config c(m.params.size());
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    auto it = values.find(m.params[i].name);
    if (it == values.end()) throw error("configuration lacks parameter '" + m.params[i].name + "'");
    auto idx = value_index(i, it->second);
    if (!idx)
      throw error("parameter '" + m.params[i].name + "' has no value " + it->second.repr() + " in the space");
    c[i] = *idx;
  }
  if (!allow_extra) {
    for (const auto& [name, v] : values)
      if (!param_index(name)) throw error("'" + name + "' is not a parameter of the space");
  }
  return c;
}

nlohmann::json to_json(const value& v) {
  switch (v.type()) {
    case value::kind::none:
      return nullptr;
    case value::kind::boolean:
      return v.as_bool();
    case value::kind::integer:
      return v.as_int();
    case value::kind::real:
      return v.as_real();
    case value::kind::string:
      return v.as_string();
    case value::kind::list: {
      auto a = nlohmann::json::array();
      for (const auto& e : v.as_list())
        a.push_back(to_json(e));
      return a;
    }
  }
  return nullptr;
}

value from_json(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return {};
    case nlohmann::json::value_t::boolean:
      return value(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return value(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return value(static_cast<std::int64_t>(j.get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return value(j.get<double>());
    case nlohmann::json::value_t::string:
      return value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      value_list l;
      for (const auto& e : j)
        l.push_back(from_json(e));
      return value(std::move(l));
    }
    default:
      throw error("a JSON object is not a parameter value: " + describe_json(j));
  }
}

config config_from_json(const search_space& s, const nlohmann::json& object, const std::string& owner,
                        const json_fault& fail) {
  auto failed = [&](const std::string& key, const std::string& why) {
    fail(key, why);
    throw error(why);  // (a fault handler that returns)
  };
  if (!object.is_object())
    failed("", "expected a JSON object {parameter: value}, got " + describe_json(object));
  std::map<std::string, value, std::less<>> values;
  for (const auto& [name, v] : object.items()) {
    if (!s.param_index(name)) failed(name, "not a parameter of " + owner);
    try {
      values[name] = from_json(v);
    } catch (const error& e) {
      failed(name, e.what());
    }
  }
  try {
    return s.from_values(values, false);
  } catch (const error& e) {
    failed("", e.what());
  }
  return {};
}

}  // namespace kf
