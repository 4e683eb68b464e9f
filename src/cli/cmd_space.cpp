#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <limits>

#include "cli/cli.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/replay.hpp"
#include "kforge/problem.hpp"

namespace po = boost::program_options;

namespace kf::cli {

namespace {
// What the file is: a T1 file, a kernel description, or a recording in its format.
std::string source_label(const problem& prob) {
  if (prob.source_kind == "t1") return "T1 file";
  if (prob.source_kind == "kernel") return "kforge kernel description";
  if (prob.source_kind == "program") return "Triton program";
  const auto format = load_recorded_cached(prob.source_file)->format;
  const std::string name = format == "kernel_tuner" ? "Kernel Tuner cache"
                           : format == "t4"         ? "T4 results"
                           : format == "ktt"        ? "KTT output"
                                                    : format;
  return "recording: " + name + "; the valid set is its recorded configurations";
}
}  // namespace

int cmd_space(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge space FILE [options]\n\n"
      "Describes the search space of FILE: a T1 file, a kforge kernel description, or a recording\n"
      "(Kernel Tuner cache, T4, KTT; .gz too), whose valid set is its recorded configurations.\n\noptions");
  desc.add_options()("help,h", "show this help")("list", po::value<std::string>()->implicit_value("20"),
                                                 "print the first N valid configurations")(
      "sample", po::value<std::string>(), "print N uniformly drawn valid configurations")(
      "seed", po::value<std::string>()->default_value("0"), "seed for --sample")(
      "json", "print the description as JSON")("file", po::value<std::string>(), "the space file");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("file")) throw config_error("kforge space", "FILE", "missing: give a T1 file or a recording");
  const auto file = vm["file"].as<std::string>();
  const auto doc = load_document(file);
  const bool t1 = doc.root.is_object() && doc.root.contains("ConfigurationSpace");
  const bool kernel = doc.root.is_object() && doc.root.contains("source") && doc.root.contains("entry");
  problem prob = t1 ? load_t1(file) : kernel ? load_kernel_problem(file) : load_cache_problem(file);
  const auto& sp = prob.space;
  const auto& vs = sp.valid();
  const auto st = sp.stats();
  const auto checked = check_space(sp);
  std::vector<config> listed, sampled;
  if (vm.count("list")) {
    const auto n = std::min<std::uint64_t>(
        vs.size(),
        whole_number("--list", vm["list"].as<std::string>(), 0, std::numeric_limits<std::uint64_t>::max()));
    for (std::size_t i = 0; i < n; ++i)
      listed.push_back(vs.at(i));
  }
  if (vm.count("sample")) {
    rng r(whole_number("--seed", vm["seed"].as<std::string>(), 0, std::numeric_limits<std::uint64_t>::max()));
    const auto n = whole_number("--sample", vm["sample"].as<std::string>(), 0, 1'000'000);
    for (std::uint64_t i = 0; i < n; ++i)
      sampled.push_back(sp.sample(r));
  }
  if (vm.count("json")) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& p : sp.params()) {
      nlohmann::json values = nlohmann::json::array();
      for (const auto& v : p.values)
        values.push_back(to_json(v));
      params.push_back({{"name", p.name}, {"type", std::string(to_string(p.type))}, {"values", values}});
    }
    const auto configs = [&](const std::vector<config>& cs) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& c : cs)
        a.push_back(sp.to_json(c));
      return a;
    };
    nlohmann::json out = {{"file", file},
                          {"kind", prob.source_kind},
                          {"source", source_label(prob)},
                          {"params", params},
                          {"constraints", sp.constraint_sources()},
                          {"combinations", st.cartesian_size},
                          {"valid", vs.size()},
                          {"raised_configurations", checked.raised_configurations},
                          {"first_raise", checked.first_raise},
                          {"warnings", checked.warnings()}};
    if (!sp.explicit_valid_set()) out["enumeration_seconds"] = st.seconds;
    if (vm.count("list")) out["list"] = configs(listed);
    if (vm.count("sample")) out["sample"] = configs(sampled);
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::cout << "space " << file << " (" << source_label(prob) << ")\n";
  for (const auto& p : sp.params()) {
    std::cout << "  " << p.name << " (" << to_string(p.type) << ", " << p.values.size() << " values): ";
    for (std::size_t i = 0; i < p.values.size() && i < 12; ++i)
      std::cout << (i ? ", " : "") << p.values[i].repr();
    if (p.values.size() > 12) std::cout << ", ...";
    std::cout << "\n";
  }
  for (const auto& c : sp.constraint_sources())
    std::cout << "  constraint: " << c << "\n";
  std::printf("combinations: %.0f\nvalid: %zu (%.3f%%)\n", st.cartesian_size, vs.size(),
              100.0 * static_cast<double>(vs.size()) / std::max(1.0, st.cartesian_size));
  if (!sp.explicit_valid_set())
    std::printf("enumerated in %.3f s (%llu partial assignments, %llu constraint evaluations)\n", st.seconds,
                static_cast<unsigned long long>(st.nodes_visited),
                static_cast<unsigned long long>(st.constraint_evaluations));
  std::fflush(stdout);
  std::cout.flush();
  std::cerr << checked.warnings();
  if (vm.count("list"))
    for (const auto& c : listed)
      std::cout << "  " << sp.describe(c) << "\n";
  if (vm.count("sample"))
    for (const auto& c : sampled)
      std::cout << "  " << sp.describe(c) << "\n";
  return 0;
}

}  // namespace kf::cli
