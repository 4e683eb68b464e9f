// A replay set-up over the stencil2d space that kforge recorded itself (experiments/stencil2d-h200,
// part of the repository): usable by every test, with or without ../shared.
#pragma once

#include <memory>

#include "kforge/evaluator.hpp"
#include "kforge/problem.hpp"
#include "kforge/evaluators/replay.hpp"
#include "support/test_support.hpp"

namespace kf::test {

struct stencil_replay {
  problem prob = load_t1((source_dir() / "experiments/stencil2d-h200/T1.json").string());
  std::shared_ptr<const recorded_file> recording =
      load_recorded_cached((source_dir() / "experiments/stencil2d-h200/cache.json").string());
  evaluator make_evaluator(std::size_t parallelism = 1) const {
    return evaluator(replay_evaluator(recording, prob.space, parallelism));
  }
};

}  // namespace kf::test
