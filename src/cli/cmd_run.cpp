#include <signal.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include "cli/cli.hpp"
#include "kforge/embedded.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/mpi.hpp"
#include "kforge/experiment.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
// Progress: redrawn in place on a terminal, a plain line every few seconds when piped.
class progress_reporter {
 public:
  explicit progress_reporter(bool tty) : tty_(tty), t0_(std::chrono::steady_clock::now()) {}

  void on_trial(const trial& t, const run_history& h, const budget_spec& b) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const bool final_of_budget = b.evaluations && h.size() >= *b.evaluations;
    if (!tty_ && elapsed - last_print_ < 2.0 && !final_of_budget && h.size() != 1) return;
    last_print_ = elapsed;
    std::string line = "trials " + std::to_string(h.size());
    if (b.evaluations) line += "/" + std::to_string(*b.evaluations);
    char buf[128];
    if (const auto* best = h.best()) {
      std::snprintf(buf, sizeof buf, " | best %.4f ms (trial %llu)", best->time_ms,
                    static_cast<unsigned long long>(best->sequence));
      line += buf;
    } else {
      line += " | best -";
    }
    line += " | elapsed " + format_duration(elapsed);
    line += " | clock " + format_duration(t.clock_s);
    if (b.evaluations)
      line += " | left " + std::to_string(*b.evaluations - std::min(*b.evaluations, h.size())) + " evals";
    if (b.simulated_seconds)
      line += " | sim budget left " + format_duration(std::max(0.0, *b.simulated_seconds - t.clock_s));
    if (tty_)
      std::cout << "\r\033[K" << line << std::flush;
    else
      std::cout << line << "\n";
  }
  void finish() {
    if (tty_) std::cout << "\n";
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  double last_print_ = -1e9;
};
// SIGINT (Ctrl-C) asks the run to stop: the loop ends before its next step and the command says how to
// resume. The handler resets itself (SA_RESETHAND), so a second Ctrl-C ends the process at once.
std::atomic<bool> interrupted{false};

extern "C" void on_sigint(int) {
  interrupted.store(true);
}

class sigint_guard {
 public:
  sigint_guard() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // no SA_RESTART: a blocking wait returns early
    ::sigaction(SIGINT, &sa, &previous_);
  }
  ~sigint_guard() { ::sigaction(SIGINT, &previous_, nullptr); }
  sigint_guard(const sigint_guard&) = delete;
  sigint_guard& operator=(const sigint_guard&) = delete;

 private:
  struct sigaction previous_ {};
};

// `s` as one shell word.
std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-@%") ==
          std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The options of a distributed run, from the command line.
mpi::options distributed_options(const po::variables_map& vm) {
  mpi::options o;
  if (vm.count("rank-timeout"))
    o.rank_timeout_s =
        static_cast<double>(whole_number("--rank-timeout", vm["rank-timeout"].as<std::string>(), 1, 86400));
  o.allow_mixed_devices = vm.count("allow-mixed-gpus") > 0;
  o.rank0_evaluates = vm.count("rank0-evaluates") > 0;
  o.log = &std::cerr;
  return o;
}

int run_and_report(experiment_spec& spec, const po::variables_map& vm, const std::vector<std::string>& args,
                   mpi::session* distributed);
}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge run [CONFIG] [options]\n\n"
      "Runs the experiment described by CONFIG (YAML or JSON). Without CONFIG, runs the embedded default:\n"
      "a replay of a 2D stencil's space that kforge measured on an NVIDIA H200.\n\noptions");
  desc.add_options()("help,h", "show this help")("resume", "continue the run in the output folder")(
      "output,o", po::value<std::string>(), "run folder (overrides the config's output)")(
      "seed", po::value<std::string>(), "seed, 0 to 2^64-1 (overrides the config's seed)")(
      "evaluations", po::value<std::string>(),
      "evaluation budget, a positive number (overrides the config's)")(
      "devices", po::value<std::string>(),
      "GPUs to use, e.g. 0,2 (overrides the cuda evaluator's devices; default: the config's, else every "
      "GPU visible under CUDA_VISIBLE_DEVICES; under mpirun, on every host)")(
      "rank-timeout", po::value<std::string>(),
      "under mpirun: seconds of silence after which a rank is lost and its variants go to the other ranks "
      "(default 60)")("allow-mixed-gpus",
                      "under mpirun: run even when the ranks' GPU models differ (their trials are then not "
                      "comparable)")("rank0-evaluates",
                                     "under mpirun: rank 0 also evaluates (its host's GPUs), besides "
                                     "running the search")("quiet,q", "no progress lines")(
      "json", "print the outcome as JSON on standard output (progress and notes go to standard error)")(
      "config", po::value<std::string>(), "the experiment config");
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  const std::string file = vm.count("config") ? vm["config"].as<std::string>()
                                              : std::string(embedded::scheme) + "configs/default.yaml";
  auto spec = load_experiment(file);
  if (vm.count("output")) spec.output = vm["output"].as<std::string>();
  if (vm.count("seed"))
    spec.seed =
        whole_number("--seed", vm["seed"].as<std::string>(), 0, std::numeric_limits<std::uint64_t>::max());
  if (vm.count("evaluations"))
    spec.budget.evaluations =
        whole_number("--evaluations", vm["evaluations"].as<std::string>(), 1, 1'000'000'000'000'000);
  if (vm.count("devices")) {
    const auto text = vm["devices"].as<std::string>();
    if (spec.evaluator.type != "cuda")
      throw config_error("--devices", "",
                         "only the cuda evaluator runs on GPUs (this experiment's evaluator is " +
                             spec.evaluator.type + ")");
    nlohmann::json list = nlohmann::json::array();
    std::size_t at = 0;
    while (at <= text.size()) {
      const auto comma = std::min(text.find(',', at), text.size());
      const auto item = text.substr(at, comma - at);
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 4)
        throw config_error("--devices", "",
                           "expected GPU indices separated by commas (e.g. 0,1), got '" + text + "'");
      list.push_back(std::stoi(item));
      at = comma + 1;
    }
    spec.evaluator.params["devices"] = list;
  }
  // Under mpirun or srun (docs/distributed.md) every process runs this command: rank 0 goes on below with
  // an evaluator that distributes, every other rank serves it.
  std::optional<mpi::session> distributed;
  if (mpi::launched_size() > 1) {
    distributed.emplace(distributed_options(vm));
    if (distributed->size() == 1)  // N copies of one run would fight over its folder
      throw config_error(
          "command line", "mpirun",
          "started as one of " + std::to_string(mpi::launched_size()) +
              " processes, but MPI sees only this one: the launcher did not connect them (srun "
              "needs --mpi=pmix; docs/distributed.md)");
    if (distributed->rank() != 0) return distributed->serve(spec);
  } else {
    for (const char* o : {"rank-timeout", "allow-mixed-gpus", "rank0-evaluates"})
      if (vm.count(o))
        throw config_error("command line", std::string("--") + o,
                           "applies only to a run started by mpirun or srun (docs/distributed.md)");
  }
  const int status = run_and_report(spec, vm, args, distributed ? &*distributed : nullptr);
  if (distributed) distributed->set_exit_status(status);
  return status;
}

namespace {
// The run (rank 0's part of it under MPI: `distributed` is then its session), its progress and its outcome.
int run_and_report(experiment_spec& spec, const po::variables_map& vm, const std::vector<std::string>& args,
                   mpi::session* distributed) {
  // Constraints that raise are warned about; a space without a valid configuration is a config error.
  const auto checked = check_space(spec.prob.space);
  std::cerr << checked.warnings();
  if (checked.enumerated && checked.valid == 0)
    throw config_error(spec.file, "problem", "the space has no valid configuration, nothing to run");
  const bool json_out = vm.count("json") > 0;
  const bool quiet = vm.count("quiet") > 0 || json_out;
  std::ostream& out = json_out ? std::cerr : std::cout;  // with --json, stdout holds only the JSON
  const bool resume = vm.count("resume") > 0;
  const bool auto_folder = spec.output.empty();
  spec.output = choose_run_folder(spec, resume, &std::cerr);
  out << "kforge run: " << spec.name << " | problem " << spec.prob.source_kind << " " << spec.prob.source_file
      << " (" << spec.prob.space.dimension() << " parameters) | strategy " << spec.strategy.type
      << " | evaluator " << spec.evaluator.type << " | seed " << spec.seed;
  if (!spec.start.empty()) out << " | start " << spec.start.size() << " configuration(s)";
  out << " | output " << spec.output.string() << "\n";
  progress_reporter progress(stdout_is_tty());
  run_options opts;
  if (distributed) {
    out << "distributed: " << distributed->size() << " processes (rank 0 runs the search"
        << (vm.count("rank0-evaluates") ? " and evaluates" : "")
        << ", every other rank evaluates on its host)\n";
    opts.make_evaluator = distributed->evaluator_factory(spec);
  }
  opts.resume = resume;
  opts.log = &std::cerr;
  opts.interrupt = &interrupted;
  if (!quiet)
    opts.on_trial = [&](const trial& t, const run_history& h, const budget_spec& b) {
      progress.on_trial(t, h, b);
    };
  const sigint_guard on_sigint;
  const auto res = run_experiment(spec, opts);
  if (!quiet) progress.finish();
  const auto* best = res.history.best();
  std::string resume_command;
  if (res.reason == stop_reason::interrupted) {
    // The store holds every trial committed so far; the same command with --resume continues the run.
    std::vector<std::string> again(args.begin(), args.end());
    if (!resume) again.push_back("--resume");
    if (auto_folder) again.insert(again.end(), {"--output", spec.output.string()});
    resume_command = program_name + " run";
    for (const auto& a : again)
      resume_command += " " + shell_quote(a);
  }
  if (json_out) {
    nlohmann::json j = {{"folder", spec.output.string()},
                        {"name", spec.name},
                        {"reason", std::string(to_string(res.reason))},
                        {"trials", res.history.size()},
                        {"resumed", res.resumed},
                        {"clock_s", res.clock_s},
                        {"wall_s", res.wall_s},
                        {"best", nullptr}};
    if (best)
      j["best"] = {{"sequence", best->sequence},
                   {"time_ms", best->time_ms},
                   {"configuration", spec.prob.space.to_json(best->cfg)}};
    if (!resume_command.empty()) j["resume_command"] = resume_command;
    std::cout << j.dump(1) << std::endl;
  }
  if (res.reason == stop_reason::interrupted) {
    out << "interrupted after " << res.history.size() << " trials; resume with: " << resume_command
        << std::endl;
    return 130;
  }
  if (json_out) return 0;
  std::cout << "stopped: " << to_string(res.reason) << " after " << res.history.size() << " trials";
  if (res.resumed) std::cout << " (" << res.resumed << " taken from the stored run)";
  std::cout << "; clock " << format_duration(res.clock_s) << ", wall " << format_duration(res.wall_s) << "\n";
  if (best) {
    std::printf("best: %.4f ms (median; IQR %.4f ms) at trial %llu: %s\n", best->time_ms, best->time_iqr_ms,
                static_cast<unsigned long long>(best->sequence), spec.prob.space.describe(best->cfg).c_str());
  } else {
    std::cout << "best: no configuration ran correctly\n";
  }
  std::cout << "run folder: " << spec.output.string() << " (kforge report " << spec.output.string() << ")\n";
  return 0;
}
}  // namespace

}  // namespace kf::cli
