// kforge: the public entry points. Include what you use; this header only declares the set-up call.
#pragma once

#include <string_view>

namespace kf {

/// Registers the built-in strategies, evaluators, transforms and surrogates. Idempotent and thread
/// safe; every entry point of kforge calls it, user code calls it before adding its own plug-ins.
void register_builtins();

/// kforge's version string.
std::string_view version() noexcept;

}  // namespace kf
