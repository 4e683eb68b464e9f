#include "kforge/python_bridge.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "kforge/error.hpp"

namespace kf {

namespace {
std::mutex bridge_mu;
std::mutex load_mu;  // one thread loads libkforge_python.so; the others wait for it
python_bridge& bridge() {
  static python_bridge b;
  return b;
}
bool installed() {
  return static_cast<bool>(bridge().make_strategy);
}

// The folder of the library this code is in (libkforge_core.so), where libkforge_python.so lives too.
std::filesystem::path own_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&set_python_bridge), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path();
  return {};
}
}  // namespace

void set_python_bridge(python_bridge b) {
  std::lock_guard lk(bridge_mu);
  bridge() = std::move(b);
}

const python_bridge& python_support(const config_location& where) {
  {
    std::lock_guard lk(bridge_mu);
    if (installed()) return bridge();
  }
  std::lock_guard load_lock(load_mu);
  {
    std::lock_guard lk(bridge_mu);
    if (installed()) return bridge();
  }
  // Load libkforge_python.so: RTLD_GLOBAL, so that libpython's symbols serve the extension modules the
  // interpreter imports later (kforge._core, numpy, ...). Loading twice returns the same handle.
  std::string lib;
  if (const char* env = std::getenv("KFORGE_PYTHON_LIBRARY"); env && *env)
    lib = env;
  else
    lib = (own_folder() / "libkforge_python.so").string();
  const auto how =
      "python strategies need kforge's Python support (libkforge_python.so, built when <repo>/.venv holds "
      "nanobind: scripts/install-deps, then scripts/build)";
  void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* why = ::dlerror();
    where.fail(std::string(how) + "; loading " + lib + " failed: " + (why ? why : "dlopen failed"));
  }
  using embed_fn = int (*)(char* message, std::size_t size);
  auto* embed = reinterpret_cast<embed_fn>(::dlsym(handle, "kforge_python_embed"));
  if (!embed) where.fail(std::string(how) + "; " + lib + " has no kforge_python_embed");
  char message[4096] = {};
  if (embed(message, sizeof message) != 0)
    where.fail(std::string("cannot start Python for a python strategy: ") + message);
  std::lock_guard lk(bridge_mu);
  if (!installed())
    where.fail("Python started, but importing kforge._core installed no python strategy support");
  return bridge();
}

std::vector<option_spec> python_strategy_base_options() {
  return {required_option("module", option_type::string,
                          "the Python file (relative to the config file) or importable module name"),
          required_option("class", option_type::string,
                          "the strategy class in it: propose(n), observe(trials), optional finished(); "
                          "its other options are those its `options` attribute declares")};
}

void register_python_strategy() {
  strategy_registry().add(
      {"python",
       "a strategy written in Python: a class with propose(n) and observe(trials) (docs/plugins.md)",
       python_strategy_base_options(),
       [](const options& o) { return python_support(o.where()).make_strategy(o); },
       [](const nlohmann::json& params, const config_location& where) {
         return python_support(where).declared_options(params, where);
       }});
}

}  // namespace kf
