#include <boost/program_options.hpp>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/evaluator.hpp"
#include "kforge/plugin.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transform.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
// "strategy" -> "strategies", "evaluator" -> "evaluators".
std::string plural(const std::string& kind) {
  if (kind.size() > 1 && kind.back() == 'y') return kind.substr(0, kind.size() - 1) + "ies";
  return kind + "s";
}

template <class R>
void list(const R& reg) {
  std::cout << plural(reg.kind()) << ":\n";
  for (const auto& name : reg.names()) {
    const auto e = reg.get(name);
    std::cout << "\n" << name << ": " << e.summary << "\n";
    if (e.options.empty())
      std::cout << "  (no options)\n";
    else
      std::cout << describe_options(e.options);
  }
  std::cout << "\n";
}
template <class R>
nlohmann::json entries_json(const R& reg) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : reg.names()) {
    const auto e = reg.get(name);
    nlohmann::json options = nlohmann::json::array();
    for (const auto& o : e.options) {
      nlohmann::json j = {{"name", o.name},
                          {"type", std::string(to_string(o.type))},
                          {"required", o.required},
                          {"default", o.default_value},
                          {"doc", o.doc}};
      const auto bound = [&](double x) {
        return o.type == option_type::integer ? nlohmann::json(static_cast<std::int64_t>(x))
                                              : nlohmann::json(x);
      };
      if (o.min) j["min"] = bound(*o.min);
      if (o.max) j["max"] = bound(*o.max);
      if (!o.choices.empty()) j["choices"] = o.choices;
      options.push_back(std::move(j));
    }
    out.push_back({{"name", name}, {"summary", e.summary}, {"options", options}});
  }
  return out;
}
}  // namespace

int cmd_plugins(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge plugins [--json] [--plugin FILE.so ...]\n\nLists the registered strategies, evaluators "
      "and "
      "transforms and their options with defaults and ranges, and the plug-ins loaded with "
      "--plugin.\n\noptions");
  desc.add_options()("help,h", "show this help")("json", "print the plug-ins as JSON");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  const auto loaded = loaded_plugins();
  if (vm.count("json")) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& p : loaded)
      files.push_back({{"file", p.resolved.string()}, {"added", p.added}});
    std::cout << nlohmann::json{{"strategies", entries_json(strategy_registry())},
                                {"evaluators", entries_json(evaluator_registry())},
                                {"transforms", entries_json(transform_registry())},
                                {"plugins", files}}
                     .dump(1)
              << "\n";
    return 0;
  }
  list(strategy_registry());
  list(evaluator_registry());
  list(transform_registry());
  if (!loaded.empty()) {
    std::cout << "plug-ins loaded:\n";
    for (const auto& p : loaded) {
      std::cout << "  " << p.resolved.string() << ":";
      for (const auto& a : p.added)
        std::cout << " " << a << (&a == &p.added.back() ? "" : ",");
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace kf::cli
