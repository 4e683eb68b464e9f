// kf::plugin_host: shared-library plug-ins (strategies, evaluators, transforms) built out of tree.
//
// A plug-in is a shared library linked against kforge::core (find_package(kforge), docs/plugins.md) that
// defines ONE entry symbol,
//
//   extern "C" int kforge_plugin_init(kf::plugin_host* host);
//
// written with the KFORGE_PLUGIN macro below, which checks the ABI before running any of the plug-in's
// code:
//
//   KFORGE_PLUGIN(host) {
//     host.strategies().add({"my_search", "what it is", {kf::int_option("k", 3, "...")},
//                            [](const kf::options& o) { return kf::strategy(my_search{o}, "my_search"); }});
//   }
//
// kforge loads plug-ins named by `plugins: [file.so]` in an experiment or score config, or by
// `--plugin file.so` on the command line (kf::load_plugin). Registration is explicit: the entry point adds
// plain structs, held by value, to the registries; nothing registers itself from a static initialiser.
//
// ABI: KFORGE_PLUGIN_ABI_VERSION names the binary interface of kforge's public headers (the layout of the
// registries, strategies, evaluators, transforms, trials and spaces, and the C++ standard library's ABI).
// A plug-in built against headers of another ABI is refused before any of its C++ code touches kforge's
// objects, with a message naming both versions. The version is bumped with every release that changes
// such a layout.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "kforge/evaluator.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transform.hpp"

/// The plug-in ABI of these headers: kforge's ABI generation times two, plus libstdc++'s dual-ABI flag
/// (a plug-in built with _GLIBCXX_USE_CXX11_ABI=0 cannot share std::string with kforge).
#if defined(_GLIBCXX_USE_CXX11_ABI)
#define KFORGE_PLUGIN_ABI_VERSION (1 * 2 + _GLIBCXX_USE_CXX11_ABI)
#else
#define KFORGE_PLUGIN_ABI_VERSION (1 * 2)
#endif

namespace kf {

/// What a plug-in's entry point receives. The first three members are the stable prefix that every
/// kforge ABI keeps (the entry point checks them before anything else); the rest may be used only when
/// host_abi equals the plug-in's KFORGE_PLUGIN_ABI_VERSION.
struct plugin_host {
  std::uint32_t host_abi = KFORGE_PLUGIN_ABI_VERSION;  ///< kforge's ABI
  std::uint32_t plugin_abi = 0;                        ///< written by the entry point: the plug-in's ABI
  const char* host_version = nullptr;                  ///< kforge's version, for messages
  // --- valid only when the ABIs match ---
  std::string file;   ///< the plug-in's path
  std::string error;  ///< why registration failed (set by the entry point)

  registry<strategy>& strategies() const { return strategy_registry(); }
  registry<evaluator, const evaluator_context&>& evaluators() const { return evaluator_registry(); }
  registry<transform, const transform_site&>& transforms() const { return transform_registry(); }
};

/// Return codes of kforge_plugin_init.
enum plugin_status : int { plugin_ok = 0, plugin_failed = 1, plugin_abi_mismatch = 2 };

namespace detail {
/// The body of every entry point: records the plug-in's ABI, refuses a mismatch, runs `add`.
inline int plugin_enter(plugin_host* host, std::uint32_t abi, void (*add)(plugin_host&)) noexcept {
  host->plugin_abi = abi;
  if (host->host_abi != abi) return plugin_abi_mismatch;
  try {
    add(*host);
    return plugin_ok;
  } catch (const std::exception& e) {
    host->error = e.what();
  } catch (...) {
    host->error = "an exception that is not a std::exception";
  }
  return plugin_failed;
}
}  // namespace detail

/// A loaded plug-in.
struct loaded_plugin {
  std::string file;                ///< as given
  std::filesystem::path resolved;  ///< canonical path
  std::vector<std::string> added;  ///< what it registered: "strategy my_search", ...
};

/// Loads the plug-in `file` (a path; relative paths as dlopen takes them) once per canonical path and runs
/// its entry point. Every failure is a config_error at `where`: the file is missing or not a shared
/// library (dlerror's words), it has no kforge_plugin_init, it was built against another ABI (both
/// versions named), or its registration threw (a name already taken, ...). The library stays loaded for
/// the process's life: the registries hold its code.
const loaded_plugin& load_plugin(const std::string& file, const config_location& where);

/// The plug-ins loaded so far, in load order.
std::vector<loaded_plugin> loaded_plugins();

}  // namespace kf

/// Defines the plug-in entry point kforge_plugin_init; the braces that follow are the registration body,
/// with `host_name` a kf::plugin_host& (see the example at the top of this header).
#define KFORGE_PLUGIN(host_name)                                                                      \
  static void kforge_plugin_add_(::kf::plugin_host& host_name);                                       \
  extern "C" __attribute__((visibility("default"))) int kforge_plugin_init(::kf::plugin_host* host) { \
    return ::kf::detail::plugin_enter(host, KFORGE_PLUGIN_ABI_VERSION, &kforge_plugin_add_);          \
  }                                                                                                   \
  static void kforge_plugin_add_(::kf::plugin_host& host_name)
