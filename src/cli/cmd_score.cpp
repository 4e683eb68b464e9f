#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/cli.hpp"
#include "kforge/error.hpp"
#include "kforge/score_job.hpp"

namespace po = boost::program_options;

namespace kf::cli {

int cmd_score(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge score CONFIG [options]\n\n"
      "Runs every strategy of the score config on every recorded space with N seeds and prints the P-score\n"
      "table (autotuning_methodology's calculated random baseline; 0 = random search, 1 = optimum found at\n"
      "once). configs/score-benchmark-hub.yaml scores the six benchmark_hub spaces.\n\noptions");
  desc.add_options()("help,h", "show this help")("seeds", po::value<std::string>(),
                                                 "runs per strategy and space")(
      "seed-base", po::value<std::string>(), "first seed (the runs use seed-base .. seed-base + seeds - 1)")(
      "space", po::value<std::vector<std::string>>(), "score only these spaces (names; repeatable)")(
      "strategy", po::value<std::vector<std::string>>(), "score only these strategies (names; repeatable)")(
      "json", po::value<std::string>(), "also write the table with its P(t) curves as JSON")(
      "plot", po::value<std::string>(),
      "also draw the P(t) curves (per space and strategy, and their mean) into this PNG file with matplotlib "
      "(python/plot_pt.py)")("config", po::value<std::string>(), "the score config");
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("config")) throw config_error("kforge score", "CONFIG", "missing: give a score config");
  auto job = load_score_job(vm["config"].as<std::string>());
  if (vm.count("plot")) check_plotting();
  if (vm.count("seeds")) {
    job.seeds = whole_number("--seeds", vm["seeds"].as<std::string>(), 1, 1'000'000);
  }
  if (vm.count("seed-base")) {
    job.seed_base = whole_number("--seed-base", vm["seed-base"].as<std::string>(), 0, 1'000'000'000);
  }
  if (vm.count("space")) {
    const auto keep = vm["space"].as<std::vector<std::string>>();
    std::erase_if(job.spaces,
                  [&](const auto& sp) { return std::find(keep.begin(), keep.end(), sp.name) == keep.end(); });
    if (job.spaces.empty())
      throw config_error("--space", "", "none of the named spaces is in the score config");
  }
  if (vm.count("strategy")) {
    const auto keep = vm["strategy"].as<std::vector<std::string>>();
    std::erase_if(job.strategies, [&](const plugin_spec& p) {
      return std::find(keep.begin(), keep.end(), p.type) == keep.end();
    });
    if (job.strategies.empty())
      throw config_error("--strategy", "", "none of the named strategies is in the score config");
  }
  std::cout << "kforge score: " << job.spaces.size() << " spaces x " << job.strategies.size()
            << " strategies x " << job.seeds << " seeds\n";
  const auto table = run_score_job(job, [](const score_cell& c) {
    std::printf("  %-28s %-24s P = %6.3f  (runs %5.2f +- %4.2f; %.0f evaluations; best/opt %.3f)\n",
                c.space.c_str(), c.strategy.substr(0, 24).c_str(), c.score.score, c.score.per_run_mean,
                c.score.per_run_std, c.mean_evaluations, c.mean_best_over_opt);
    std::fflush(stdout);
  });
  std::cout << "\n" << format_score_table(table);
  if (vm.count("json")) {
    std::ofstream out(vm["json"].as<std::string>());
    if (!out) throw error("cannot write '" + vm["json"].as<std::string>() + "'");
    out << score_table_json(table).dump(1) << "\n";
  }
  if (vm.count("plot")) draw_plot("plot_pt.py", score_table_json(table), vm["plot"].as<std::string>());
  return 0;
}

}  // namespace kf::cli
