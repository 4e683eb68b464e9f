#include "kforge/experiment_config.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "kforge/error.hpp"
#include "kforge/evaluator.hpp"
#include "kforge/kforge.hpp"
#include "kforge/plugin.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transfer.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

plugin_spec read_plugin(const document& doc, const json& node, const std::string& key) {
  plugin_spec p;
  p.where = doc.at(key);
  if (node.is_string()) {
    p.type = node.get<std::string>();
    p.params = json::object();
    return p;
  }
  if (!node.is_object()) p.where.fail("expected {type: <name>, params: {...}} or a name");
  for (const auto& [k, v] : node.items())
    if (k != "type" && k != "params") doc.at(key + "." + k).fail("unknown key (expected type, params)");
  if (!node.contains("type") || !node["type"].is_string())
    doc.at(key + ".type").fail("expected the name of a registered " + key);
  p.type = node["type"].get<std::string>();
  p.params = node.value("params", json::object());
  if (p.params.is_null()) p.params = json::object();
  if (!p.params.is_object()) doc.at(key + ".params").fail("expected a mapping of options");
  return p;
}

std::optional<double> positive_number(const document& doc, const json& node, const std::string& key,
                                      bool integer) {
  if (!node.contains(key)) return std::nullopt;
  const auto& v = node.at(key);
  const auto loc = doc.at("budget." + key);
  if (!v.is_number() || v.is_boolean()) loc.fail("expected a positive number, got " + describe_json(v));
  const double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x)) loc.fail("expected a positive number, got " + describe_json(v));
  if (integer && (std::floor(x) != x || x > 1e15))
    loc.fail("expected a whole number, got " + describe_json(v));
  return x;
}
// `transfer: [recording, ...]`: the recordings must exist, the strategy must take them, and each must
// hold successful configurations of the problem's space (they are bound to it now, so that a mistake
// stops before anything runs).
void read_transfer(const document& doc, experiment_spec& s, bool strategy_takes_transfer) {
  const auto& node = doc.root["transfer"];
  if (!node.is_array() || node.empty())
    doc.at("transfer")
        .fail("expected a non-empty list of recordings of this kernel (Kernel Tuner cache, T4 or KTT)");
  if (!strategy_takes_transfer)
    doc.at("transfer")
        .fail("strategy '" + s.strategy.type +
              "' does not use transfer records (bo, hybrid and ga do; docs/transfer.md)");
  auto records = std::make_shared<transfer_data>();
  for (std::size_t i = 0; i < node.size(); ++i) {
    const auto where = doc.at("transfer[" + std::to_string(i) + "]");
    if (!node[i].is_string() || node[i].get<std::string>().empty())
      where.fail("expected the path of a recording, got " + describe_json(node[i]));
    const std::string path = resolve_path(node[i].get<std::string>(), doc.base_dir);
    if (path.rfind("embedded:", 0) != 0 && !std::filesystem::is_regular_file(path))
      where.fail("no such file: " + path);
    try {
      auto one = load_transfer({path}, s.prob.space);
      records->sources.push_back(std::move(one.sources.front()));
    } catch (const config_error&) {
      throw;
    } catch (const std::exception& e) {
      where.fail(e.what());
    }
    s.transfer.push_back(path);
  }
  s.transfer_records = std::move(records);
}

// `start: default`, or `start: [default | {parameter: value, ...}, ...]`: the configurations evaluated
// before the strategy proposes; each valid, no two the same. A mapping names every parameter.
void read_start(const document& doc, experiment_spec& s) {
  const auto& space = s.prob.space;
  auto one = [&](const json& item, const std::string& key) -> config {
    if (item.is_string() && item.get<std::string>() == "default") {
      auto d = default_configuration(s.prob);
      if (!d)
        doc.at(key).fail("the problem states no default configuration (a " + s.prob.source_kind +
                         " problem); give it as {parameter: value, ...}");
      return *d;
    }
    if (!item.is_object())
      doc.at(key).fail("expected default or {parameter: value, ...}, got " + describe_json(item));
    const config c =
        config_from_json(space, item, "the problem", [&](const std::string& name, const std::string& why) {
          doc.at(name.empty() ? key : key + "." + name).fail(why);
        });
    if (!space.is_valid(c))
      doc.at(key).fail(
          space.describe(c) + " is not a valid configuration of the problem (" +
          (space.explicit_valid_set() ? "not among its recorded ones" : "it violates a constraint") + ")");
    return c;
  };
  const auto& node = doc.root["start"];
  if (!node.is_array()) {
    s.start.push_back(one(node, "start"));
    return;
  }
  if (node.empty()) doc.at("start").fail("expected default or a non-empty list of configurations");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const auto key = "start[" + std::to_string(i) + "]";
    auto c = one(node[i], key);
    if (std::find(s.start.begin(), s.start.end(), c) != s.start.end())
      doc.at(key).fail(space.describe(c) + " is already an earlier entry");
    s.start.push_back(std::move(c));
  }
}

}  // namespace

std::vector<std::string> load_config_plugins(const document& doc, const std::string& key) {
  std::vector<std::string> out;
  if (!doc.root.is_object() || !doc.root.contains(key)) return out;
  const auto& list = doc.root[key];
  if (!list.is_array()) doc.at(key).fail("expected a list of plug-in files (shared libraries)");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto item = key + "[" + std::to_string(i) + "]";
    if (!list[i].is_string() || list[i].get<std::string>().empty())
      doc.at(item).fail("expected the path of a plug-in (a .so file), got " + describe_json(list[i]));
    const auto path = resolve_path(list[i].get<std::string>(), doc.base_dir);
    out.push_back(load_plugin(path, doc.at(item)).resolved.string());
  }
  return out;
}

experiment_spec parse_experiment(const document& doc) {
  register_builtins();
  const auto& root = doc.root;
  if (!root.is_object())
    doc.at("").fail(
        "expected a mapping (name, problem, strategy, evaluator, budget, seed, output, batch_size)");
  static const std::set<std::string> known = {"name",   "problem",  "strategy", "evaluator",
                                              "budget", "seed",     "output",   "batch_size",
                                              "start",  "schedule", "transfer", "plugins"};
  for (const auto& [k, v] : root.items())
    if (!known.count(k))
      doc.at(k).fail(
          "unknown key (expected one of name, problem, strategy, evaluator, budget, seed, output, "
          "batch_size, start, schedule, transfer, plugins)");
  experiment_spec s;
  // Plug-ins first: the strategy, evaluator and transforms below may come from them.
  s.plugins = load_config_plugins(doc, "plugins");
  s.file = doc.file;
  s.base_dir = doc.base_dir;
  s.raw = root;
  if (root.contains("name")) {
    if (!root["name"].is_string())
      doc.at("name").fail("expected a string, got " + describe_json(root["name"]));
    s.name = root["name"].get<std::string>();
    check_name(s.name, doc.at("name"));  // it names the run folder
  } else {
    s.name = sanitized_name(std::filesystem::path(doc.file).stem().string());
  }
  if (!root.contains("problem"))
    doc.at("").fail(
        "missing key 'problem' (the space to search: {t1: file}, {cache: file} or {kernel: file})");
  s.prob = load_problem(doc, "problem");
  if (!root.contains("strategy")) doc.at("").fail("missing key 'strategy' ({type: <name>, params: {...}})");
  s.strategy = read_plugin(doc, root["strategy"], "strategy");
  bool strategy_takes_transfer = false;
  {
    // Validate the options now, so that a bad config fails before anything runs.
    strategy_takes_transfer = strategy_registry().create(s.strategy).accepts_transfer();
  }
  if (root.contains("transfer")) read_transfer(doc, s, strategy_takes_transfer);
  if (root.contains("start")) read_start(doc, s);
  if (!root.contains("evaluator"))
    doc.at("").fail("missing key 'evaluator' ({type: replay, params: {file: ...}})");
  s.evaluator = read_plugin(doc, root["evaluator"], "evaluator");
  { (void)evaluator_registry().validate(s.evaluator); }
  if (root.contains("budget")) {
    const auto& b = root["budget"];
    if (!b.is_object())
      doc.at("budget").fail("expected a mapping with evaluations, wall_time_s and/or simulated_time_s");
    for (const auto& [k, v] : b.items())
      if (k != "evaluations" && k != "wall_time_s" && k != "simulated_time_s" && k != "wall_grace_s" &&
          k != "wall_includes_setup")
        doc.at("budget." + k)
            .fail(
                "unknown key (expected evaluations, wall_time_s, wall_grace_s, wall_includes_setup, "
                "simulated_time_s)");
    if (auto e = positive_number(doc, b, "evaluations", true))
      s.budget.evaluations = static_cast<std::size_t>(*e);
    s.budget.wall_seconds = positive_number(doc, b, "wall_time_s", false);
    s.budget.simulated_seconds = positive_number(doc, b, "simulated_time_s", false);
    s.budget.wall_grace_seconds = positive_number(doc, b, "wall_grace_s", false);
    if (s.budget.wall_grace_seconds && !s.budget.wall_seconds)
      doc.at("budget.wall_grace_s").fail("applies only with wall_time_s");
    if (b.contains("wall_includes_setup")) {
      if (!b["wall_includes_setup"].is_boolean())
        doc.at("budget.wall_includes_setup").fail("expected true or false");
      s.budget.wall_includes_setup = b["wall_includes_setup"].get<bool>();
      if (s.budget.wall_includes_setup && !s.budget.wall_seconds)
        doc.at("budget.wall_includes_setup").fail("applies only with wall_time_s");
    }
  }
  if (root.contains("seed")) s.seed = seed_value(root["seed"], doc.at("seed"));
  if (root.contains("batch_size")) {
    const auto& v = root["batch_size"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1'000'000)
      doc.at("batch_size").fail("expected a positive integer, got " + describe_json(v));
    s.batch_size = v.get<std::size_t>();
  }
  if (root.contains("schedule")) {
    const auto& v = root["schedule"];
    if (v == "continuous")
      s.schedule = schedule_mode::continuous;
    else if (v == "batches")
      s.schedule = schedule_mode::batches;
    else
      doc.at("schedule")
          .fail("expected continuous (propose as results arrive) or batches (wait for each batch)");
  }
  // Without `output:` the folder is chosen when the run starts (kf::choose_run_folder): a fresh one
  // under runs/, or with --resume the latest unfinished run of this experiment.
  if (root.contains("output")) {
    if (!root["output"].is_string() || root["output"].get<std::string>().empty())
      doc.at("output").fail("expected a folder path");
    s.output = root["output"].get<std::string>();
  }
  return s;
}

experiment_spec load_experiment(const std::string& path) {
  return parse_experiment(load_document(path));
}

}  // namespace kf
