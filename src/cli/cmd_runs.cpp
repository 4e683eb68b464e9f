// kforge runs [FOLDER] and kforge compare RUN...: runs listed and put side by side.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/options.hpp"
#include "kforge/run_folder.hpp"
#include "kforge/run_summary.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
std::string best_text(const run_summary& r) {
  char buf[32];
  if (!r.best_trial()) return "-";
  std::snprintf(buf, sizeof buf, "%.4f", r.best_trial()->time_ms);
  return buf;
}

std::string seed_text(const run_summary& r) {
  return r.seed.is_null() ? "?" : describe_json(r.seed);
}

po::variables_map parse(const std::vector<std::string>& args, const po::options_description& desc,
                        const char* positional) {
  po::positional_options_description pos;
  pos.add(positional, -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}
}  // namespace

int cmd_runs(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge runs [FOLDER] [--json]\n\n"
      "Lists the runs in FOLDER (default: runs/, where runs without an output folder go): folder, name,\n"
      "strategy, seed, trials, best time and how each ended.\n\noptions");
  desc.add_options()("help,h", "show this help")("json", "print the list as JSON")(
      "folder", po::value<std::vector<std::string>>(), "the folder holding run folders");
  const auto vm = parse(args, desc, "folder");
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  const auto folders =
      vm.count("folder") ? vm["folder"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (folders.size() > 1) throw config_error("kforge runs", "FOLDER", "give one folder");
  const std::filesystem::path root = folders.empty() ? default_runs_root : std::filesystem::path(folders[0]);
  if (!std::filesystem::is_directory(root)) throw error("no folder '" + root.string() + "'");
  const auto runs = read_runs(root);
  if (vm.count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : runs) {
      auto j = summary_json(r);
      j.erase("convergence");
      j.erase("failures");
      out.push_back(std::move(j));
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  if (runs.empty()) {
    std::cout << "no runs in " << root.string() << "\n";
    return 0;
  }
  std::printf("%-40s %-16s %-10s %-6s %7s %10s  %s\n", "folder", "name", "strategy", "seed", "trials",
              "best (ms)", "ended");
  for (const auto& r : runs)
    std::printf("%-40s %-16s %-10s %-6s %7zu %10s  %s\n", r.folder.filename().string().c_str(),
                r.name.c_str(), r.strategy.c_str(), seed_text(r).c_str(), r.trials.size(),
                best_text(r).c_str(),
                (r.state + (r.state_detail.empty() ? "" : ": " + r.state_detail)).c_str());
  return 0;
}

int cmd_compare(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge compare RUN... [--json]\n\n"
      "Puts runs side by side as a Markdown table: strategy, seed, trials, best time, best relative to\n"
      "the best of these runs, the clock and the trials at which each run came within 95% of that best\n"
      "(time <= best / 0.95), and the trials by status.\n\noptions");
  desc.add_options()("help,h", "show this help")("json", "print the comparison as JSON")(
      "run", po::value<std::vector<std::string>>(), "the run folders");
  const auto vm = parse(args, desc, "run");
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("run")) throw config_error("kforge compare", "RUN", "missing: give one or more run folders");
  std::vector<run_summary> runs;
  for (const auto& dir : vm["run"].as<std::vector<std::string>>())
    runs.push_back(read_run(dir));
  double overall = INFINITY;
  for (const auto& r : runs)
    if (r.best_trial()) overall = std::min(overall, r.best_trial()->time_ms);
  std::array<bool, status_count> shown{};
  for (const auto& r : runs)
    for (std::size_t s = 0; s < status_count; ++s)
      shown[s] = shown[s] || r.by_status[s] > 0;
  constexpr double fraction = 0.95;
  if (vm.count("json")) {
    nlohmann::json out = {
        {"best_of_all_ms", std::isfinite(overall) ? nlohmann::json(overall) : nlohmann::json()},
        {"fraction", fraction},
        {"runs", nlohmann::json::array()}};
    for (const auto& r : runs) {
      auto j = summary_json(r);
      j.erase("convergence");
      j.erase("failures");
      const auto hit = std::isfinite(overall) ? first_within(r, overall, fraction) : std::nullopt;
      j["within_95_percent"] =
          hit ? nlohmann::json{{"clock_s", hit->best_clock_s}, {"trials", hit->trials}} : nlohmann::json();
      out["runs"].push_back(std::move(j));
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::cout << "| run | strategy | seed | trials | best (ms) | vs best | time to 95% | trials to 95% |";
  for (std::size_t s = 0; s < status_count; ++s)
    if (shown[s]) std::cout << " " << to_string(static_cast<status>(s)) << " |";
  std::cout << "\n|---|---|---|---:|---:|---:|---:|---:|";
  for (std::size_t s = 0; s < status_count; ++s)
    if (shown[s]) std::cout << "---:|";
  std::cout << "\n";
  for (const auto& r : runs) {
    const auto hit = std::isfinite(overall) ? first_within(r, overall, fraction) : std::nullopt;
    char vs[32] = "-";
    if (r.best_trial()) std::snprintf(vs, sizeof vs, "%.3fx", r.best_trial()->time_ms / overall);
    std::cout << "| " << r.folder.string() << " | " << r.strategy << " | " << seed_text(r) << " | "
              << r.trials.size() << " | " << best_text(r) << " | " << vs << " | "
              << (hit ? format_duration(hit->best_clock_s) : "-") << " | "
              << (hit ? std::to_string(hit->trials) : "-") << " |";
    for (std::size_t s = 0; s < status_count; ++s)
      if (shown[s]) std::cout << " " << r.by_status[s] << " |";
    std::cout << "\n";
  }
  std::printf(
      "\nbest of these runs: %s ms; 95%%: the clock (and trials) at which a run's best came within 95%% "
      "of it (time <= best / 0.95)\n",
      std::isfinite(overall) ? std::to_string(overall).c_str() : "-");
  return 0;
}

}  // namespace kf::cli
