// How kforge reaches strategies written in Python (strategy type "python", docs/plugins.md).
//
// kforge's C++ core knows no Python. The Python package's native module (kforge._core, python/src)
// installs a bridge when it is imported: in a Python process that imported kforge, or in the interpreter
// that kforge embeds on demand. A program that is not Python (the kforge CLI, the tests) loads
// libkforge_python.so (next to libkforge_core.so) the first time a python strategy is asked for; that
// library links libpython, starts the interpreter and imports kforge._core. So `kforge` starts on a
// machine without Python, and a config that names no python strategy never loads it.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/options.hpp"
#include "kforge/strategy.hpp"

namespace kf {

struct python_bridge {
  /// The options a python strategy's params are checked against: module and class, plus what the class
  /// declares. Throws config_error at `where` (a module that does not import, a class that is missing).
  std::function<std::vector<option_spec>(const nlohmann::json& params, const config_location& where)>
      declared_options;
  /// The strategy for validated options (module, class and the class's own).
  std::function<strategy(const options& opts)> make_strategy;
};

/// Installs the bridge (kforge._core calls it when imported). Thread safe.
void set_python_bridge(python_bridge b);

/// The bridge; the first call without one loads libkforge_python.so ($KFORGE_PYTHON_LIBRARY when set),
/// which installs it. Throws config_error at `where` when Python support is not there (kforge built
/// without it, the library or the interpreter missing), saying how to get it.
const python_bridge& python_support(const config_location& where);

/// The options every python strategy has (module, class), with their documentation.
std::vector<option_spec> python_strategy_base_options();

/// Registers strategy type "python" (called by register_builtins).
void register_python_strategy();

}  // namespace kf
