#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/options.hpp"
#include "kforge/run_summary.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
std::string budget_text(const nlohmann::json& b) {
  if (!b.is_object() || b.empty()) return "none";
  std::string out;
  if (b.contains("evaluations")) out += std::to_string(b["evaluations"].get<std::size_t>()) + " evaluations";
  if (b.contains("simulated_time_s"))
    out += (out.empty() ? "" : ", ") + format_duration(b["simulated_time_s"].get<double>()) + " simulated";
  if (b.contains("wall_time_s"))
    out += (out.empty() ? "" : ", ") + format_duration(b["wall_time_s"].get<double>()) + " wall";
  return out;
}

std::string state_line(const run_summary& r) {
  if (r.state == "finished") return "finished: " + r.state_detail;
  if (r.state == "running") return "running (" + r.state_detail + ")";
  const std::string resume = "; kforge run " +
                             (r.config_file.empty() ? std::string("CONFIG") : r.config_file) +
                             " --resume --output " + r.folder.string() + " continues it";
  if (r.state == "interrupted") return "interrupted (Ctrl-C)" + resume;
  if (r.state == "failed") return "failed: " + r.state_detail;
  if (r.state == "never started") return "never started: no trial was recorded";
  return "stopped without an end record (killed or crashed)" + resume;
}

void print_identity(const run_summary& r) {
  std::cout << "run " << r.folder.string();
  if (!r.name.empty()) std::cout << " (" << r.name << ")";
  std::cout << ": " << r.trials.size() << " trials, " << state_line(r) << "\n";
  std::cout << "config: " << (r.config_file.empty() ? "?" : r.config_file) << " | strategy " << r.strategy;
  if (r.strategy_params.is_object() && !r.strategy_params.empty())
    std::cout << " " << describe_json(r.strategy_params, 160);
  std::cout << " | seed " << (r.seed.is_null() ? "?" : describe_json(r.seed)) << " | budget "
            << budget_text(r.budget);
  if (!r.batch_size.is_null()) std::cout << " | batch " << describe_json(r.batch_size);
  std::cout << "\n";
  const auto& ev = r.evaluator_meta;
  std::cout << "evaluator: " << r.evaluator;
  if (ev.is_object() && ev.contains("device") && ev["device"].is_string() &&
      !ev["device"].get<std::string>().empty())
    std::cout << " " << ev["device"].get<std::string>();
  if (ev.is_object() && ev.contains("file") && ev["file"].is_string())
    std::cout << " (recording " << ev["file"].get<std::string>() << ")";
  std::cout << "\n";
}

void print_best(const run_summary& r) {
  const auto* b = r.best_trial();
  if (!b) {
    std::cout << "best: none (no trial ran correctly)\n";
  } else {
    std::printf("best: %.4f ms (median, IQR %.4f ms, min %.4f ms) at trial %llu, clock %s\n", b->time_ms,
                b->time_iqr_ms, b->time_min_ms, static_cast<unsigned long long>(b->sequence),
                format_duration(b->clock_s).c_str());
    std::cout << "  " << r.space.describe(b->cfg) << "\n";
  }
  const auto& opt = r.recorded_optimum;
  if (opt.is_object() && opt.contains("time_ms")) {
    const double o = opt["time_ms"].get<double>();
    std::printf("recorded optimum: %.4f ms %s", o, describe_json(opt["configuration"], 200).c_str());
    if (b) std::printf("; best / optimum = %.3f%s", b->time_ms / o, b->time_ms <= o ? " (found)" : "");
    std::printf("\n");
  }
}

void print_statuses(const run_summary& r) {
  std::cout << "trials by status:";
  for (std::size_t s = 0; s < status_count; ++s)
    if (r.by_status[s]) std::cout << " " << to_string(static_cast<status>(s)) << " " << r.by_status[s];
  std::cout << "\n";
  const auto failures = failure_examples(r);
  if (failures.empty()) return;
  std::cout << "failures (the first of each status):\n";
  for (const auto& [s, lines] : failures) {
    std::cout << "  " << to_string(s) << " (" << r.by_status[static_cast<std::size_t>(s)] << "):\n";
    for (const auto& l : lines)
      std::cout << "    " << l << "\n";
  }
}

// Rows at 1..5 trials, then doubling, and the last; in arrival order, with the clock at which each best
// was known (non-decreasing).
void print_convergence(const run_summary& r) {
  std::cout << "\nconvergence (trials in arrival order)\n"
               "  trials  best (ms)   at trial  known at      vs final\n";
  const double final_best = r.best_trial() ? r.best_trial()->time_ms : NAN;
  const auto& c = r.convergence;
  std::size_t next = 1;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i + 1 != next && i + 1 != c.size()) continue;
    const auto& p = c[i];
    if (std::isfinite(p.best_ms))
      std::printf("  %6zu  %10.4f  %8llu  %-12s  %7.3fx\n", p.trials, p.best_ms,
                  static_cast<unsigned long long>(p.best_sequence), format_duration(p.best_clock_s).c_str(),
                  p.best_ms / final_best);
    else
      std::printf("  %6zu  %10s\n", p.trials, "-");
    next = next < 5 ? next + 1 : next * 2;
  }
}
// What python/plot_convergence.py draws: every run's points in arrival order.
nlohmann::json convergence_plot_data(const std::vector<run_summary>& runs) {
  nlohmann::json out = {{"runs", nlohmann::json::array()}};
  for (const auto& r : runs) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : r.convergence)
      points.push_back(
          {{"trials", p.trials},
           {"clock_s", p.clock_s},
           {"best_ms", std::isfinite(p.best_ms) ? nlohmann::json(p.best_ms) : nlohmann::json()}});
    std::string label = r.folder.filename().string();
    if (!r.strategy.empty()) label += " (" + r.strategy + ")";
    out["runs"].push_back({{"label", label}, {"points", points}});
  }
  return out;
}
}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge report RUN... [--json] [--plot FILE.png]\n\n"
      "For each run folder RUN: its config, strategy, seed and budget, how it ended, the best\n"
      "configuration (on replay, against the recording's optimum), the trials by status with the first\n"
      "failure messages, and a convergence table (best time after n trials, in arrival order, with the\n"
      "clock at which each best was known). --plot draws the convergence of every run (best time so far\n"
      "against trials and against the clock, the runs on the same axes) with matplotlib\n"
      "(python/plot_convergence.py).\n\noptions");
  desc.add_options()("help,h", "show this help")("json", "print the summaries as JSON (an array)")(
      "plot", po::value<std::string>(), "also draw the convergence of the runs into this PNG file")(
      "run", po::value<std::vector<std::string>>(), "the run folders");
  po::positional_options_description pos;
  pos.add("run", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("run")) throw config_error("kforge report", "RUN", "missing: give a run folder");
  std::vector<run_summary> runs;
  for (const auto& dir : vm["run"].as<std::vector<std::string>>())
    runs.push_back(read_run(dir));
  if (vm.count("plot"))
    draw_plot("plot_convergence.py", convergence_plot_data(runs), vm["plot"].as<std::string>());
  if (vm.count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : runs)
      out.push_back(summary_json(r));
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i) std::cout << "\n";
    print_identity(runs[i]);
    print_best(runs[i]);
    print_statuses(runs[i]);
    print_convergence(runs[i]);
  }
  return 0;
}

}  // namespace kf::cli
