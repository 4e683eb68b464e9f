// kf::test::block_fibers: see the class comment. Test support only.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kf::test {

// The threads of one CUDA block as fibers (ucontext), for host emulations of kernels
// (sgemm_tiled_emulation_test.cpp, attention_tiled_test.cpp). run() resumes every thread in an order chosen
// per interval; a thread runs until its next sync() (the emulation's __syncthreads, or any other point where
// threads must switch, e.g. a warp shuffle) or its end. An interval ends when every thread has arrived (or
// every thread has ended); a thread that ends while others wait, or threads at different sync counts, are
// errors (returned as text). `set_thread(t)` is called before thread t is resumed (it sets the emulation's
// threadIdx). The fibers run on one OS thread in the order asked for: deterministic for a given rng.
class block_fibers {
 public:
  enum class order { forward, reverse, shuffled };

  explicit block_fibers(int threads)
      : ctx_(static_cast<std::size_t>(threads)),
        done_(static_cast<std::size_t>(threads)),
        arrivals_(static_cast<std::size_t>(threads)) {
    // The stacks are kept for the whole test program (allocating and touching fresh ones for every launch
    // would cost more than the emulation).
    while (stacks().size() < ctx_.size())
      stacks().push_back(std::make_unique<char[]>(stack_bytes));
  }

  std::string run(const std::function<void()>& body, order o, std::mt19937& rng,
                  const std::function<void(int)>& set_thread) {
    body_ = &body;
    const int n = static_cast<int>(ctx_.size());
    for (int t = 0; t < n; ++t) {
      prepare(ctx_[static_cast<std::size_t>(t)], stacks()[static_cast<std::size_t>(t)].get(), &main_);
      done_[static_cast<std::size_t>(t)] = false;
      arrivals_[static_cast<std::size_t>(t)] = 0;
    }
    std::vector<int> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    if (o == order::reverse) std::reverse(perm.begin(), perm.end());
    block_fibers* const outer = current;
    current = this;
    std::string error;
    for (int interval = 1;; ++interval) {
      if (o == order::shuffled) std::shuffle(perm.begin(), perm.end(), rng);
      for (int t : perm) {
        if (done_[static_cast<std::size_t>(t)]) continue;
        running_ = t;
        set_thread(t);
        swapcontext(&main_, &ctx_[static_cast<std::size_t>(t)]);
      }
      const auto ended = std::count(done_.begin(), done_.end(), true);
      if (ended == n) break;
      if (ended != 0) {
        error = std::to_string(ended) + " threads ended while " + std::to_string(n - ended) +
                " wait at sync " + std::to_string(interval);
        break;
      }
      for (int t = 0; t < n; ++t)
        if (arrivals_[static_cast<std::size_t>(t)] != interval) {
          error = "thread " + std::to_string(t) + " at sync " +
                  std::to_string(arrivals_[static_cast<std::size_t>(t)]) + ", expected " +
                  std::to_string(interval);
          break;
        }
      if (!error.empty()) break;
    }
    current = outer;
    return error;
  }

  static void sync() {
    block_fibers& b = *current;
    ++b.arrivals_[static_cast<std::size_t>(b.running_)];
    swapcontext(&b.ctx_[static_cast<std::size_t>(b.running_)], &b.main_);
  }

 private:
  static constexpr std::size_t stack_bytes = 128 * 1024;
  // A fresh context that runs fiber_main on `stack` and then resumes `link`. (Out of line: getcontext
  // returns twice, which would make the caller's loop variables suspect.)
  [[gnu::noinline]] static void prepare(ucontext_t& c, char* stack, ucontext_t* link) {
    getcontext(&c);
    c.uc_stack.ss_sp = stack;
    c.uc_stack.ss_size = stack_bytes;
    c.uc_link = link;
    makecontext(&c, &block_fibers::fiber_main, 0);
  }
  static void fiber_main() {
    block_fibers& b = *current;
    (*b.body_)();
    b.done_[static_cast<std::size_t>(b.running_)] = true;
  }  // returns to main_ (uc_link)

  static std::vector<std::unique_ptr<char[]>>& stacks() {
    static std::vector<std::unique_ptr<char[]>> s;
    return s;
  }

  static inline block_fibers* current = nullptr;
  ucontext_t main_{};
  std::vector<ucontext_t> ctx_;
  std::vector<bool> done_;
  std::vector<int> arrivals_;
  int running_ = 0;
  const std::function<void()>* body_ = nullptr;
};

}  // namespace kf::test
