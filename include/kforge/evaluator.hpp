// kf::evaluator: turns configurations into trials.
//
// Implementations: "replay" (recorded spaces; simulated clock), "cuda" (NVRTC + one worker process per
// GPU; wall clock). A user evaluator is a plain struct satisfying kf::evaluator_like:
//
//   struct my_eval {
//     std::vector<kf::trial> evaluate(std::span<const kf::evaluation_request> batch);  // required
//     std::size_t parallelism() const;          // optional: requests worth keeping in flight (1)
//     nlohmann::json describe() const;          // optional: recorded with the run
//     bool simulated_clock() const;             // optional: trials' costs are the clock (false)
//   };
//
// Contract: evaluate() returns exactly one trial per request, in request order, with sequence and cfg
// copied from the request; a failing variant is a trial with a status, never an exception. An
// exception from evaluate() means the evaluator itself is broken and stops the run.
// Asynchronous evaluators override submit()/collect() of kf::evaluator's interface directly.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/options.hpp"
#include "kforge/registry.hpp"
#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

struct problem;

struct evaluation_request {
  std::uint64_t sequence = 0;
  config cfg;
  std::uint32_t batch = 0;
};

template <class T>
concept evaluator_like = requires(T& e, std::span<const evaluation_request> batch) {
  { e.evaluate(batch) } -> std::convertible_to<std::vector<trial>>;
};

namespace detail {
template <class T>
concept has_parallelism = requires(const T& e) {
  { e.parallelism() } -> std::convertible_to<std::size_t>;
};
template <class T>
concept has_describe = requires(const T& e) {
  { e.describe() } -> std::convertible_to<nlohmann::json>;
};
template <class T>
concept has_simulated_clock = requires(const T& e) {
  { e.simulated_clock() } -> std::convertible_to<bool>;
};
}  // namespace detail

/// The asynchronous interface the experiment loop drives.
class async_evaluator {
 public:
  virtual ~async_evaluator() = default;
  /// Queues requests; returns at once or after evaluating them (synchronous implementations).
  virtual void submit(std::vector<evaluation_request> requests) = 0;
  /// Completed trials, in any order. Blocks until at least one is complete when `wait` and any is
  /// in flight; returns an empty vector when nothing is in flight.
  virtual std::vector<trial> collect(bool wait) = 0;
  virtual std::size_t in_flight() const = 0;
  virtual std::size_t parallelism() const { return 1; }
  virtual nlohmann::json describe() const { return nlohmann::json::object(); }
  virtual bool simulated_clock() const { return false; }
};

class evaluator {
 public:
  template <evaluator_like T>
  requires(!std::same_as<std::remove_cvref_t<T>, evaluator>)
      evaluator(T e)  // NOLINT(google-explicit-constructor)
      : impl_(std::make_unique<sync_model<T>>(std::move(e))) {}
  explicit evaluator(std::unique_ptr<async_evaluator> a) : impl_(std::move(a)) {}

  evaluator(evaluator&&) noexcept = default;
  evaluator& operator=(evaluator&&) noexcept = default;

  void submit(std::vector<evaluation_request> r) { impl_->submit(std::move(r)); }
  std::vector<trial> collect(bool wait) { return impl_->collect(wait); }
  std::size_t in_flight() const { return impl_->in_flight(); }
  std::size_t parallelism() const { return impl_->parallelism(); }
  nlohmann::json describe() const { return impl_->describe(); }
  bool simulated_clock() const { return impl_->simulated_clock(); }

  /// Synchronous convenience: submit, then collect until all are back; returned in request order.
  std::vector<trial> evaluate(std::vector<evaluation_request> requests);

 private:
  template <class T>
  struct sync_model final : async_evaluator {
    explicit sync_model(T v) : value(std::move(v)) {}
    void submit(std::vector<evaluation_request> r) override {
      auto done = value.evaluate(std::span<const evaluation_request>(r));
      for (auto& t : done)
        ready.push_back(std::move(t));
    }
    std::vector<trial> collect(bool) override {
      std::vector<trial> out(std::make_move_iterator(ready.begin()), std::make_move_iterator(ready.end()));
      ready.clear();
      return out;
    }
    std::size_t in_flight() const override { return ready.size(); }
    std::size_t parallelism() const override {
      if constexpr (detail::has_parallelism<T>) return value.parallelism();
      return 1;
    }
    nlohmann::json describe() const override {
      if constexpr (detail::has_describe<T>) return value.describe();
      return nlohmann::json::object();
    }
    bool simulated_clock() const override {
      if constexpr (detail::has_simulated_clock<T>) return value.simulated_clock();
      return false;
    }
    T value;
    std::deque<trial> ready;
  };
  std::unique_ptr<async_evaluator> impl_;
};

/// What an evaluator factory may use besides its options.
struct evaluator_context {
  const problem& prob;
  std::filesystem::path base_dir;  ///< where relative paths in the config are resolved
  std::filesystem::path run_dir;   ///< the run's output folder (may be empty)
};

registry<evaluator, const evaluator_context&>& evaluator_registry();

}  // namespace kf
