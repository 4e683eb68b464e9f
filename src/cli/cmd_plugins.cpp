#include <boost/program_options.hpp>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/evaluator.hpp"
#include "kforge/strategy.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
template <class R>
void list(const R& reg) {
  std::cout << reg.kind() << "s:\n";
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
}  // namespace

int cmd_plugins(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge plugins\n\nLists the registered strategies and evaluators and their options with "
      "defaults.\n\noptions");
  desc.add_options()("help,h", "show this help");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  list(strategy_registry());
  list(evaluator_registry());
  return 0;
}

}  // namespace kf::cli
