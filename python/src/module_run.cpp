// Experiments, runs, scoring and run stores from Python.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>

#include "convert.hpp"
#include "kforge/document.hpp"
#include "kforge/experiment.hpp"
#include "kforge/run_summary.hpp"
#include "kforge/score_job.hpp"
#include "kforge/store.hpp"
#include "module.hpp"

namespace kf::py {

namespace {

// A config given as a path, a dict (relative paths from base_dir, default the working directory) or an
// Experiment.
document config_document(nb::handle config, const std::optional<std::string>& base_dir, const char* what) {
  if (nb::isinstance<nb::str>(config) || nb::hasattr(config, "__fspath__"))
    return load_document(nb::cast<std::string>(nb::str(config)));
  if (PyDict_Check(config.ptr())) {
    const auto j = to_json(config, what);
    return parse_document(j.dump(), std::string("<") + what + " dict>",
                          base_dir ? std::filesystem::path(*base_dir) : std::filesystem::current_path());
  }
  throw nb::type_error((std::string(what) + " must be a file path or a dict").c_str());
}

experiment_spec to_spec(nb::handle config, const std::optional<std::string>& base_dir) {
  if (nb::isinstance<experiment_spec>(config)) return nb::cast<const experiment_spec&>(config);
  return parse_experiment(config_document(config, base_dir, "experiment"));
}

nb::dict budget_dict(const budget_spec& b) {
  nb::dict d;
  if (b.evaluations) d["evaluations"] = *b.evaluations;
  if (b.wall_seconds) d["wall_time_s"] = *b.wall_seconds;
  if (b.simulated_seconds) d["simulated_time_s"] = *b.simulated_seconds;
  return d;
}

nb::dict plugin_dict(const plugin_spec& p) {
  nb::dict d;
  d["type"] = nb::str(p.type.c_str());
  d["params"] = to_python(p.params);
  return d;
}

std::vector<trial> trials_of(const run_history& h) {
  return {h.trials().begin(), h.trials().end()};
}

}  // namespace

void bind_run(nb::module_& m) {
  nb::class_<experiment_spec>(m, "Experiment",
                              "An experiment config, read and checked: kforge.load_experiment(path) or "
                              "kforge.experiment(dict). Pass it to kforge.run().")
      .def_ro("name", &experiment_spec::name)
      .def_ro("file", &experiment_spec::file)
      .def_rw("seed", &experiment_spec::seed)
      .def_prop_rw(
          "output", [](const experiment_spec& s) { return s.output.string(); },
          [](experiment_spec& s, const std::string& o) { s.output = o; })
      .def_prop_rw(
          "evaluations", [](const experiment_spec& s) { return s.budget.evaluations; },
          [](experiment_spec& s, std::optional<std::size_t> n) { s.budget.evaluations = n; })
      .def_prop_ro("budget", [](const experiment_spec& s) { return budget_dict(s.budget); })
      .def_prop_ro("strategy", [](const experiment_spec& s) { return plugin_dict(s.strategy); })
      .def_prop_ro("evaluator", [](const experiment_spec& s) { return plugin_dict(s.evaluator); })
      .def_prop_ro("space", [](const experiment_spec& s) { return s.prob.space; })
      .def_prop_ro("problem",
                   [](const experiment_spec& s) {
                     nb::dict d;
                     d["kind"] = nb::str(s.prob.source_kind.c_str());
                     d["file"] = nb::str(s.prob.source_file.c_str());
                     return d;
                   })
      .def_ro("batch_size", &experiment_spec::batch_size)
      .def_prop_ro(
          "start",
          [](const experiment_spec& s) {
            nb::list l;
            for (const auto& c : s.start)
              l.append(config_to_python(c));
            return l;
          },
          "The configurations evaluated first (the config's `start:`), as tuples of value indices.")
      .def_prop_ro(
          "config", [](const experiment_spec& s) { return to_python(s.raw); }, "The config as read.")
      .def("__repr__", [](const experiment_spec& s) {
        return "kforge.Experiment(" + s.name + ": " + s.prob.source_kind + " " + s.prob.source_file +
               ", strategy " + s.strategy.type + ", evaluator " + s.evaluator.type + ", seed " +
               std::to_string(s.seed) + ")";
      });

  m.def(
      "load_experiment", [](const std::string& path) { return load_experiment(path); }, "path"_a,
      "Reads and checks an experiment config (YAML or JSON); kforge.ConfigError names the file, key and "
      "reason.");
  m.def(
      "experiment",
      [](nb::dict config, std::optional<std::string> base_dir) { return to_spec(config, base_dir); },
      "config"_a, "base_dir"_a = nb::none(),
      "An experiment from a dict with the keys of a config file; relative paths from base_dir (default: the "
      "working directory).");

  nb::class_<run_result>(m, "RunResult", "What kforge.run() returns.")
      .def_prop_ro("folder", [](const run_result& r) { return r.folder.string(); })
      .def_prop_ro("reason", [](const run_result& r) { return std::string(to_string(r.reason)); })
      .def_prop_ro("trials", [](const run_result& r) { return trials_of(r.history); })
      .def_prop_ro("best",
                   [](const run_result& r) -> std::optional<trial> {
                     if (const auto* b = r.history.best()) return *b;
                     return std::nullopt;
                   })
      .def_ro("clock_s", &run_result::clock_s)
      .def_ro("wall_s", &run_result::wall_s)
      .def_ro("setup_s", &run_result::setup_s)
      .def_ro("resumed", &run_result::resumed)
      .def("__repr__", [](const run_result& r) {
        return "kforge.RunResult(" + r.folder.string() + ": " + std::string(to_string(r.reason)) + " after " +
               std::to_string(r.history.size()) + " trials)";
      });

  m.def(
      "run",
      [](nb::handle config, std::optional<std::string> output, bool resume, std::optional<std::uint64_t> seed,
         std::optional<std::size_t> evaluations, nb::object progress, std::optional<std::string> base_dir) {
        auto spec = to_spec(config, base_dir);
        if (output) spec.output = *output;
        if (seed) spec.seed = *seed;
        if (evaluations) {
          if (*evaluations == 0)
            throw config_error("kforge.run()", "evaluations", "expected a positive number");
          spec.budget.evaluations = *evaluations;
        }
        const auto checked = check_space(spec.prob.space);
        if (checked.enumerated && checked.valid == 0)
          throw config_error(spec.file, "problem", "the space has no valid configuration, nothing to run");
        std::atomic<bool> interrupted{false};
        run_options opts;
        opts.resume = resume;
        opts.interrupt = &interrupted;
        // After each trial: the progress callback, and Ctrl-C (KeyboardInterrupt) stops the run cleanly.
        nb::object pending_error;
        opts.on_trial = [&](const trial& t, const run_history&, const budget_spec&) {
          nb::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) {
            PyErr_Clear();
            interrupted = true;
          }
          if (!progress.is_none() && !interrupted) {
            try {
              progress(nb::cast(t, nb::rv_policy::copy));
            } catch (nb::python_error& e) {
              interrupted = true;
              pending_error = nb::str(e.what());
            }
          }
        };
        run_result res;
        {
          nb::gil_scoped_release release;
          res = run_experiment(spec, opts);
        }
        if (pending_error.is_valid())
          throw error("the progress callback raised, the run stopped (resume it with resume=True): " +
                      nb::cast<std::string>(pending_error));
        if (res.reason == stop_reason::interrupted)
          throw error("interrupted (Ctrl-C); the run in " + res.folder.string() +
                      " continues with kforge.run(..., resume=True)");
        return res;
      },
      "config"_a, "output"_a = nb::none(), "resume"_a = false, "seed"_a = nb::none(),
      "evaluations"_a = nb::none(), "progress"_a = nb::none(), "base_dir"_a = nb::none(),
      "Runs an experiment (a config path, a dict or an Experiment) into a run folder, as `kforge run` does. "
      "resume=True continues the run in `output` (or the latest unfinished run of the experiment). "
      "progress(trial) is called after every trial.");

  m.def(
      "score",
      [](nb::handle config, std::optional<std::size_t> seeds,
         std::optional<std::vector<std::string>> strategies, std::optional<std::string> base_dir) {
        score_job job = parse_score_job(config_document(config, base_dir, "score"));
        if (seeds) job.seeds = *seeds;
        if (strategies) {
          std::erase_if(job.strategies, [&](const plugin_spec& p) {
            return std::find(strategies->begin(), strategies->end(), p.type) == strategies->end();
          });
          if (job.strategies.empty())
            throw config_error("kforge.score()", "strategies",
                               "none of the named strategies is in the score config");
        }
        score_table table;
        {
          nb::gil_scoped_release release;
          table = run_score_job(job);
        }
        nb::dict out = nb::borrow<nb::dict>(to_python(score_table_json(table)));
        out["text"] = nb::str(format_score_table(table).c_str());
        return out;
      },
      "config"_a, "seeds"_a = nb::none(), "strategies"_a = nb::none(), "base_dir"_a = nb::none(),
      "P-scores of strategies on recorded spaces (a score config path or dict), as `kforge score`: a dict "
      "with "
      "spaces, strategies, mean_score, cells (with P(t) curves) and text (the table).");

  nb::class_<run_store>(m, "RunStore",
                        "A run folder's SQLite store. mode 'r' (default) reads any run (also one it cannot "
                        "write); 'w' creates or continues a store (one writer per folder).")
      .def(
          "__init__",
          [](run_store* self, const std::string& folder, const std::string& mode) {
            if (mode != "r" && mode != "w")
              throw config_error("kforge.RunStore()", "mode", "expected 'r' or 'w'");
            new (self) run_store(folder, mode == "r" ? store_access::read_only : store_access::read_write);
          },
          "folder"_a, "mode"_a = "r")
      .def_prop_ro("folder", [](const run_store& s) { return s.dir().string(); })
      .def("trials", &run_store::trials, "Every stored trial, by sequence.")
      .def("__len__", &run_store::trial_count)
      .def(
          "meta", [](const run_store& s, const std::string& k) { return to_python(s.meta(k)); }, "key"_a,
          "A run-level record (experiment, space, evaluator, finished, ...), or None.")
      .def(
          "set_meta", [](run_store& s, const std::string& k, nb::handle v) { s.set_meta(k, to_json(v, k)); },
          "key"_a, "value"_a)
      .def_prop_ro(
          "space", [](const run_store& s) { return stored_space(s); },
          "The stored space's parameters (constraint-free).")
      .def(
          "set_space", [](run_store& s, const search_space& sp) { s.set_meta("space", describe_space(sp)); },
          "space"_a, "Records the space's parameters (what readers and exports need).")
      .def(
          "commit",
          [](run_store& s, nb::handle items) {
            std::vector<trial> group;
            for (auto it : items)
              group.push_back(nb::cast<trial>(it));
            const auto first = s.trial_count();
            for (std::size_t i = 0; i < group.size(); ++i)
              group[i].sequence = first + i;
            s.commit(std::span<const trial>(group));
          },
          "trials"_a, "Appends trials (sequences continue the stored ones) in one transaction.");

  m.def(
      "read_run", [](const std::string& folder) { return to_python(summary_json(read_run(folder))); },
      "folder"_a, "A run folder's summary, as `kforge report --json` prints it.");
}

}  // namespace kf::py
