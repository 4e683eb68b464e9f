// The parts of kforge._core, each bound in its own file (python/src/module_*.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace kf::py {

namespace nb = nanobind;
using namespace nb::literals;

/// Strategy (ask/tell), python strategies (the bridge), register_strategy, strategies(), load_plugin.
void bind_strategy(nb::module_& m);
/// Experiments, run, score, run stores.
void bind_run(nb::module_& m);

}  // namespace kf::py
