// kf::registry: plug-ins by name.
//
// A plug-in kind (strategies, evaluators, transforms, surrogates) has one registry. Each entry
// declares its options; create() validates the {type, params} a config gives and calls the factory.
// Built-ins are added by kf::register_builtins() (explicit: no static-initialiser self-registration,
// which static libraries silently drop); users add theirs with one add() call.
//
// Thread safety: add() and the lookups are serialised by a mutex; factories may run concurrently.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/error.hpp"
#include "kforge/options.hpp"

namespace kf {

/// {type, params} as written in a config, with where it was written.
struct plugin_spec {
  std::string type;
  nlohmann::json params = nlohmann::json::object();
  config_location where;  ///< location of the {type, params} mapping itself
};

template <class Product, class... Args>
class registry {
 public:
  using factory = std::function<Product(const options&, Args...)>;
  struct entry {
    std::string name;
    std::string summary;  ///< one line: what it is, and its reference
    std::vector<option_spec> options;
    factory make;
    /// Options that depend on the params given, for plug-ins whose options are declared by user code
    /// (a python strategy's class declares its own). When set, the params are checked against what it
    /// returns instead of `options` (which then documents the fixed part); it may throw a config_error at
    /// `where` (a module that does not load). May be empty.
    std::function<std::vector<option_spec>(const nlohmann::json& params, const config_location& where)>
        options_for = nullptr;
  };

  explicit registry(std::string kind) : kind_(std::move(kind)) {}

  /// Adds an entry; throws kf::error when the name is taken.
  void add(entry e) {
    std::lock_guard lk(mu_);
    if (entries_.count(e.name)) throw error(kind_ + " '" + e.name + "' is already registered");
    auto name = e.name;
    entries_.emplace(std::move(name), std::move(e));
  }

  bool contains(std::string_view name) const {
    std::lock_guard lk(mu_);
    return entries_.find(std::string(name)) != entries_.end();
  }

  /// The entry, or a config_error at `where.child("type")` listing the registered names.
  entry get(std::string_view name, const config_location& where = {}) const {
    std::lock_guard lk(mu_);
    auto it = entries_.find(std::string(name));
    if (it == entries_.end()) {
      std::string known;
      for (const auto& [n, e] : entries_)
        known += (known.empty() ? "" : ", ") + n;
      where.child("type").fail("unknown " + kind_ + " '" + std::string(name) + "' (registered: " + known +
                               ")");
    }
    return it->second;
  }

  /// spec.params checked against the entry's options (or its options_for's): unknown keys, wrong types
  /// and out-of-range values are config_errors at spec.where.params.<key>.
  options validate(const plugin_spec& spec) const { return validate(get(spec.type, spec.where), spec); }

  /// Validates spec.params against the entry's options and calls its factory.
  Product create(const plugin_spec& spec, Args... args) const {
    const auto e = get(spec.type, spec.where);
    return e.make(validate(e, spec), std::forward<Args>(args)...);
  }

  std::vector<std::string> names() const {
    std::lock_guard lk(mu_);
    std::vector<std::string> out;
    for (const auto& [n, e] : entries_)
      out.push_back(n);
    return out;
  }

  const std::string& kind() const noexcept { return kind_; }

 private:
  static options validate(const entry& e, const plugin_spec& spec) {
    const auto where = spec.where.child("params");
    if (e.options_for) return options(e.options_for(spec.params, where), spec.params, where);
    return options(e.options, spec.params, where);
  }

  std::string kind_;
  mutable std::mutex mu_;
  std::map<std::string, entry> entries_;
};

}  // namespace kf
