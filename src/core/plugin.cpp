#include "kforge/plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>

#include "kforge/kforge.hpp"

namespace kf {

namespace {
std::mutex plugins_mu;
// A deque: references handed out by load_plugin stay valid as plug-ins are added.
std::deque<loaded_plugin>& plugins() {
  static std::deque<loaded_plugin> v;
  return v;
}

// Every registered name, as "strategy random", "evaluator replay", ...
std::set<std::string> registered_names() {
  std::set<std::string> out;
  for (const auto& n : strategy_registry().names())
    out.insert("strategy " + n);
  for (const auto& n : evaluator_registry().names())
    out.insert("evaluator " + n);
  for (const auto& n : transform_registry().names())
    out.insert("transform " + n);
  return out;
}
}  // namespace

const loaded_plugin& load_plugin(const std::string& file, const config_location& where) {
  register_builtins();
  std::lock_guard lk(plugins_mu);
  std::error_code ec;
  const auto resolved = std::filesystem::weakly_canonical(file, ec);
  if (ec || !std::filesystem::is_regular_file(resolved))
    where.fail("plug-in '" + excerpt(file) + "' is not a file");
  for (const auto& p : plugins())
    if (p.resolved == resolved) return p;
  // RTLD_LOCAL: a plug-in's own symbols stay its own; kforge's come from libkforge_core.so, shared.
  void* handle = ::dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    where.fail("cannot load plug-in '" + file + "': " + (why ? why : "dlopen failed"));
  }
  using entry_fn = int (*)(plugin_host*);
  auto* entry = reinterpret_cast<entry_fn>(::dlsym(handle, "kforge_plugin_init"));
  if (!entry) {
    ::dlclose(handle);
    where.fail("'" + file +
               "' is not a kforge plug-in: it defines no kforge_plugin_init (write the entry point with "
               "KFORGE_PLUGIN, kforge/plugin.hpp)");
  }
  const auto before = registered_names();
  plugin_host host;
  host.host_version = version().data();
  host.file = file;
  const int rc = entry(&host);
  if (rc == plugin_abi_mismatch || host.plugin_abi != host.host_abi) {
    // The plug-in's code stays mapped (it may have run); it is never called again.
    where.fail("plug-in '" + file + "' was built against kforge plug-in ABI " +
               std::to_string(host.plugin_abi) + ", but this kforge (" + std::string(version()) +
               ") has ABI " + std::to_string(host.host_abi) +
               ": rebuild it against this kforge's installed package (find_package(kforge))");
  }
  if (rc != plugin_ok)
    where.fail("plug-in '" + file + "' failed to register: " +
               (host.error.empty() ? "its entry point returned " + std::to_string(rc) : host.error));
  loaded_plugin p{file, resolved, {}};
  for (const auto& n : registered_names())
    if (!before.count(n)) p.added.push_back(n);
  plugins().push_back(std::move(p));
  return plugins().back();
}

std::vector<loaded_plugin> loaded_plugins() {
  std::lock_guard lk(plugins_mu);
  return {plugins().begin(), plugins().end()};
}

}  // namespace kf
