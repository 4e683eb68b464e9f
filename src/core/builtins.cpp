#include <mutex>

#include "kforge/evaluators/cuda.hpp"
#include "kforge/evaluators/program.hpp"
#include "kforge/kforge.hpp"
#include "kforge/evaluators/replay.hpp"
#include "kforge/python_bridge.hpp"
#include "kforge/transform.hpp"
#include "kforge/strategies/bayesian.hpp"
#include "kforge/strategies/brute_force.hpp"
#include "kforge/strategies/common.hpp"
#include "kforge/strategies/genetic.hpp"
#include "kforge/strategies/hybrid.hpp"
#include "kforge/strategies/profile_guided.hpp"
#include "kforge/strategies/random_search.hpp"

namespace kf {

void strategies::register_builtin_strategies() {
  register_random_search();
  register_brute_force();
  register_genetic();
  register_bayesian();
  register_hybrid();
  register_profile_guided();
  register_python_strategy();
}

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    strategies::register_builtin_strategies();
    register_replay_evaluator();
    register_cuda_evaluator();
    register_program_evaluator();
    register_builtin_transforms();
  });
}

std::string_view version() noexcept {
  return KFORGE_VERSION;
}

}  // namespace kf
