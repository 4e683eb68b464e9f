// kforge: find faster GPU kernels. See README.md.
#include <boost/program_options/errors.hpp>
#include <cstring>
#include <iostream>
#include <vector>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/kforge.hpp"
#include "kforge/plugin.hpp"

namespace {
const char* usage =
    "usage: kforge <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [CONFIG]     run an experiment (no CONFIG: the embedded default, a replay of an H200 space)\n"
    "  score            P-scores of strategies on recorded spaces (the field's standard score)\n"
    "  space FILE       inspect a search space: size, valid configurations, samples\n"
    "  export RUN       write a run's trials as JSONL, CSV, T4 or a Kernel Tuner cache\n"
    "  report RUN...    a run's config, end, best (vs the recording's optimum), failures, convergence\n"
    "  runs [FOLDER]    the runs in FOLDER (default runs/): name, strategy, seed, trials, best, end\n"
    "  compare RUN...   runs side by side as a Markdown table (best, time to 95% of best, statuses)\n"
    "  plugins          registered strategies, evaluators and transforms with their options\n"
    "  render KERNEL    one configuration of a CUDA kernel as compiled and launched: source, CUBIN, launch\n"
    "\n"
    "`kforge <command> --help` (or `kforge help <command>`) describes a command's options.\n"
    "Every command takes `--plugin FILE.so` (repeatable): load a shared-library plug-in first "
    "(docs/plugins.md).\n";

// Loads the plug-ins named by --plugin FILE / --plugin=FILE and returns the other arguments.
std::vector<std::string> take_plugins(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string file;
    if (args[i] == "--plugin") {
      if (i + 1 >= args.size())
        throw kf::config_error("command line", "--plugin", "expected a plug-in file after it");
      file = args[++i];
    } else if (args[i].rfind("--plugin=", 0) == 0) {
      file = args[i].substr(9);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    kf::load_plugin(file, {"command line", "--plugin"});
  }
  return rest;
}
}  // namespace

int main(int argc, char** argv) {
  // `kforge help CMD` is `kforge CMD --help`.
  std::vector<char*> help_args;
  if (argc == 3 && !std::strcmp(argv[1], "help")) {
    static char help_flag[] = "--help";
    help_args = {argv[0], argv[2], help_flag};
    argc = 3;
    argv = help_args.data();
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::cout << usage;
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "kforge " << kf::version() << "\n";
    return 0;
  }
  kf::cli::program_name = argv[0];
  const std::string cmd = argv[1];
  const std::vector<std::string> all_args(argv + 2, argv + argc);
  try {
    kf::register_builtins();
    const auto args = take_plugins(all_args);
    if (cmd == "run") return kf::cli::cmd_run(args);
    if (cmd == "score") return kf::cli::cmd_score(args);
    if (cmd == "space") return kf::cli::cmd_space(args);
    if (cmd == "export") return kf::cli::cmd_export(args);
    if (cmd == "report") return kf::cli::cmd_report(args);
    if (cmd == "plugins") return kf::cli::cmd_plugins(args);
    if (cmd == "runs") return kf::cli::cmd_runs(args);
    if (cmd == "compare") return kf::cli::cmd_compare(args);
    if (cmd == "render") return kf::cli::cmd_render(args);
    std::cerr << "kforge: unknown command '" << cmd << "'\n\n" << usage;
    return 2;
  } catch (const kf::config_error& e) {
    std::cerr << "kforge: " << e.what() << "\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "kforge " << cmd << ": " << e.what() << " (see kforge " << cmd << " --help)\n";
    return 2;
  } catch (const kf::error& e) {
    std::cerr << "kforge: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kforge: internal error: " << e.what() << "\n";
    return 1;
  }
}
