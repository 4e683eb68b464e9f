// kf::strategy: a search strategy, asked for batches and told results (batch ask/tell).
//
// A user strategy is a plain struct (pagmo2's pattern) that satisfies kf::strategy_like:
//
//   struct my_search {
//     void initialize(const kf::search_space& space, std::uint64_t seed);          // optional
//     std::vector<kf::config> propose(const kf::search_state& s, std::size_t n);   // required
//     void observe(const kf::search_state& s, std::span<const kf::trial> done);    // required
//     bool finished(const kf::search_state& s) const;                              // optional
//     void set_transfer(std::shared_ptr<const kf::transfer_data> t);               // optional
//   };
//
// and is held by value in kf::strategy. Contract of propose(): at most n configurations, each valid,
// pairwise distinct and not seen (neither measured nor pending); fewer (even none) only when the
// strategy has nothing left to propose. observe() receives every trial of the strategy's proposals,
// in sequence order, exactly once; it also receives, exactly once and in the same order, the trials of
// the run's start configurations (an experiment's `start:`, e.g. the problem's default), which the
// strategy did not propose. Those are submitted before its first propose() and are seen (pending or
// measured) at every propose(), so a strategy that consults the state's seen() never proposes them; one
// that only remembers what it was told (a Python propose(n) without the state) may be asked before a
// start trial has come back and must not be run with `start:`. Every random choice comes from the seed given
// to initialize(), so the same seed and the same observations give the same proposals (the conformance suite
// checks all of this for every registered strategy).
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <unordered_set>
#include <vector>

#include "kforge/history.hpp"
#include "kforge/options.hpp"
#include "kforge/registry.hpp"
#include "kforge/space.hpp"
#include "kforge/transfer.hpp"
#include "kforge/trial.hpp"

namespace kf {

/// What a strategy sees: the space, the trials so far, what is still in flight, and the budget.
class search_state {
 public:
  search_state(const search_space& space, const run_history& history, std::span<const config> pending,
               std::optional<std::size_t> evaluations_left)
      : space_(&space), history_(&history), pending_(pending), evaluations_left_(evaluations_left) {}

  const search_space& space() const noexcept { return *space_; }
  const run_history& history() const noexcept { return *history_; }
  /// Proposed but not yet observed.
  std::span<const config> pending() const noexcept { return pending_; }
  /// Measured or pending.
  bool seen(const config& c) const;
  /// Evaluations the budget still allows (pending ones already subtracted), when it counts them.
  std::optional<std::size_t> evaluations_left() const noexcept { return evaluations_left_; }

 private:
  const search_space* space_;
  const run_history* history_;
  std::span<const config> pending_;
  std::optional<std::size_t> evaluations_left_;
};

template <class T>
concept strategy_like = std::move_constructible<T> &&
    requires(T& s, const search_state& st, std::size_t n, std::span<const trial> done) {
  { s.propose(st, n) } -> std::convertible_to<std::vector<config>>;
  s.observe(st, done);
};

namespace detail {
template <class T>
concept has_initialize = requires(T& s, const search_space& sp, std::uint64_t seed) {
  s.initialize(sp, seed);
};
template <class T>
concept has_finished = requires(const T& s, const search_state& st) {
  { s.finished(st) } -> std::convertible_to<bool>;
};
template <class T>
concept has_transfer = requires(T& s, std::shared_ptr<const transfer_data> t) {
  s.set_transfer(t);
};
}  // namespace detail

class strategy {
 public:
  template <strategy_like T>
  requires(!std::same_as<std::remove_cvref_t<T>, strategy>)
      strategy(T s, std::string name = typeid(T).name())  // NOLINT(google-explicit-constructor)
      : impl_(std::make_unique<model<T>>(std::move(s))), name_(std::move(name)) {}

  strategy(strategy&&) noexcept = default;
  strategy& operator=(strategy&&) noexcept = default;

  void initialize(const search_space& space, std::uint64_t seed) { impl_->initialize(space, seed); }
  std::vector<config> propose(const search_state& s, std::size_t n) { return impl_->propose(s, n); }
  void observe(const search_state& s, std::span<const trial> done) { impl_->observe(s, done); }
  bool finished(const search_state& s) const { return impl_->finished(s); }
  /// True when the held strategy takes transfer data (it has set_transfer).
  bool accepts_transfer() const noexcept { return impl_->accepts_transfer(); }
  /// Hands the strategy records of other runs before initialize(); ignored by strategies that do not
  /// accept transfer (callers check accepts_transfer() and report misuse).
  void set_transfer(std::shared_ptr<const transfer_data> t) { impl_->set_transfer(std::move(t)); }
  const std::string& name() const noexcept { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  /// The held user object, or nullptr when it is not a T.
  template <class T>
  T* extract() noexcept {
    auto* m = dynamic_cast<model<T>*>(impl_.get());
    return m ? &m->value : nullptr;
  }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual void initialize(const search_space&, std::uint64_t) = 0;
    virtual std::vector<config> propose(const search_state&, std::size_t) = 0;
    virtual void observe(const search_state&, std::span<const trial>) = 0;
    virtual bool finished(const search_state&) const = 0;
    virtual bool accepts_transfer() const noexcept = 0;
    virtual void set_transfer(std::shared_ptr<const transfer_data>) = 0;
  };
  template <class T>
  struct model final : concept_t {
    explicit model(T v) : value(std::move(v)) {}
    void initialize(const search_space& sp, std::uint64_t seed) override {
      if constexpr (detail::has_initialize<T>) value.initialize(sp, seed);
    }
    std::vector<config> propose(const search_state& s, std::size_t n) override { return value.propose(s, n); }
    void observe(const search_state& s, std::span<const trial> d) override { value.observe(s, d); }
    bool finished(const search_state& s) const override {
      if constexpr (detail::has_finished<T>) return value.finished(s);
      return false;
    }
    bool accepts_transfer() const noexcept override { return detail::has_transfer<T>; }
    void set_transfer(std::shared_ptr<const transfer_data> t) override {
      if constexpr (detail::has_transfer<T>) value.set_transfer(std::move(t));
    }
    T value;
  };
  std::unique_ptr<concept_t> impl_;
  std::string name_;
};

/// The registry of strategies ("random", "ga", ...). Factories receive the validated options.
registry<strategy>& strategy_registry();

}  // namespace kf
