#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/history.hpp"
#include "kforge/store.hpp"

namespace po = boost::program_options;

namespace kf::cli {

int cmd_report(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge report RUN\n\n"
      "Prints the best configuration of the run in folder RUN, its time, the trials by status and a\n"
      "convergence table (best time after n trials).\n\noptions");
  desc.add_options()("help,h", "show this help")("run", po::value<std::string>(), "the run folder");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("run")) throw config_error("kforge report", "RUN", "missing: give a run folder");
  const std::filesystem::path dir = vm["run"].as<std::string>();
  const run_store store(dir, store_access::read_only);
  const auto space = stored_space(store);
  run_history h;
  for (auto& t : store.trials())
    h.add(std::move(t));
  std::cout << "run " << dir.string();
  if (auto n = store.meta("name"); n.is_string()) std::cout << " (" << n.get<std::string>() << ")";
  std::cout << ": " << h.size() << " trials";
  if (auto f = store.meta("finished"); f.is_object())
    std::cout << ", " << f.value("reason", "");
  else
    std::cout << ", not finished (interrupted or running; kforge run --resume continues it)";
  std::cout << "\n";
  if (auto ev = store.meta("evaluator"); ev.is_object())
    std::cout << "evaluator: " << ev.value("type", "?")
              << (ev.contains("device") ? " " + ev.value("device", "") : "") << "\n";
  if (const auto* b = h.best()) {
    std::printf("best: %.4f ms (median, IQR %.4f ms, min %.4f ms) at trial %llu, clock %s\n", b->time_ms,
                b->time_iqr_ms, b->time_min_ms, static_cast<unsigned long long>(b->sequence),
                format_duration(b->clock_s).c_str());
    std::cout << "  " << space.describe(b->cfg) << "\n";
  } else {
    std::cout << "best: none (no trial ran correctly)\n";
  }
  std::cout << "trials by status:";
  for (std::size_t s = 0; s < status_count; ++s)
    if (h.count(static_cast<status>(s)))
      std::cout << " " << to_string(static_cast<status>(s)) << " " << h.count(static_cast<status>(s));
  std::cout << "\n\nconvergence\n  trials  clock         best (ms)   vs final\n";
  double best = INFINITY;
  const double final_best = h.best() ? h.best()->time_ms : NAN;
  std::size_t next = 1;
  const auto trials = h.trials();
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].ok()) best = std::min(best, trials[i].time_ms);
    if (i + 1 == next || i + 1 == trials.size()) {
      if (std::isfinite(best))
        std::printf("  %6zu  %-12s  %10.4f  %7.3fx\n", i + 1, format_duration(trials[i].clock_s).c_str(),
                    best, best / final_best);
      else
        std::printf("  %6zu  %-12s  %10s\n", i + 1, format_duration(trials[i].clock_s).c_str(), "-");
      next = next < 5 ? next + 1
                      : (next * 2 > trials.size() && i + 1 < trials.size() ? trials.size() : next * 2);
    }
  }
  return 0;
}

}  // namespace kf::cli
