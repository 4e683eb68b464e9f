#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/store.hpp"

namespace po = boost::program_options;

namespace kf::cli {

int cmd_export(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge export RUN [--format FORMAT] [--out FILE]\n\n"
      "Writes the trials of the run in folder RUN (by sequence), as JSONL unless --format says otherwise.\n"
      "Every trial carries its timestamp. In the t4 and kernel_tuner formats `time` is what those formats\n"
      "mean by it, the mean of the timed runs (Kernel Tuner's definition); `time_median` is kforge's\n"
      "objective, the median. kernel_tuner writes the layout Kernel Tuner writes (it loads in Kernel\n"
      "Tuner 1.5's simulation mode).\n\noptions");
  desc.add_options()("help,h", "show this help")("format,f", po::value<std::string>()->default_value("jsonl"),
                                                 "jsonl | csv | t4 | kernel_tuner")(
      "out,o", po::value<std::string>(), "output file (default: standard output)")(
      "run", po::value<std::string>(), "the run folder");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("run")) throw config_error("kforge export", "RUN", "missing: give a run folder");
  const std::filesystem::path dir = vm["run"].as<std::string>();
  const auto fmt = export_format_from_string(vm["format"].as<std::string>());
  if (!fmt) throw config_error("kforge export", "--format", "expected jsonl, csv, t4 or kernel_tuner");
  const run_store store(dir, store_access::read_only);
  const auto space = stored_space(store);
  nlohmann::json meta = {{"run", dir.string()}};
  if (auto ev = store.meta("evaluator"); ev.is_object()) {
    meta["device"] = ev.value("device", "");
    meta["kernel"] = ev.value("kernel", "");
    if (ev.contains("problem_size")) meta["problem_size"] = ev["problem_size"];
  }
  if (auto pr = store.meta("problem"); pr.is_object() && !meta.contains("problem_size") &&
                                       pr.contains("problem_size") && !pr["problem_size"].is_null())
    meta["problem_size"] = pr["problem_size"];
  const auto trials = store.trials();
  if (vm.count("out")) {
    std::ofstream out(vm["out"].as<std::string>());
    if (!out) throw error("cannot write '" + vm["out"].as<std::string>() + "'");
    export_trials(trials, space, *fmt, out, meta);
  } else {
    export_trials(trials, space, *fmt, std::cout, meta);
  }
  return 0;
}

}  // namespace kf::cli
