// Conversions between kforge's C++ types and Python objects, shared by the module's files.
//
// Contract: every function here is called with the GIL held. A Python value that does not fit raises a
// kforge.ConfigError / TypeError carrying the reason (kf::config_error / nb::type_error).
#pragma once

#include <nanobind/nanobind.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kforge/error.hpp"
#include "kforge/space.hpp"
#include "kforge/trial.hpp"
#include "kforge/value.hpp"

namespace kf::py {

namespace nb = nanobind;

/// JSON <-> Python (dict, list, str, int, float, bool, None). Python tuples become arrays; other objects
/// are a TypeError naming `what`.
nb::object to_python(const nlohmann::json& j);
nlohmann::json to_json(nb::handle h, const std::string& what = "value");

/// kf::value <-> Python.
nb::object to_python(const value& v);
value to_value(nb::handle h, const std::string& what = "value");

/// A configuration as Python sees it: a tuple of value indices, one per parameter.
nb::tuple config_to_python(const config& c);
/// A configuration from a sequence of indices (checked against the space's value counts) or a dict
/// {parameter: value} (every parameter, values from its list). Raises kforge.Error naming what is wrong.
config config_from_python(const search_space& space, nb::handle h);

/// The status from its name (ok, invalid, compile_failed, ...), else a ValueError listing the names.
status status_from_python(nb::handle h);

}  // namespace kf::py
