// The program evaluator (include/kforge/evaluators/program.hpp): configurations of a program-level
// problem become the program worker's evaluate requests, carried by the runner; its answers become trials.
// No builder: the worker applies the knobs to the source and Triton's JIT compiles in the worker.
//
//   submit(requests) -> runner.submit({"op": "evaluate", program, call, inputs, knobs, timing, ...})
//   runner outcome (answer, or the worker lost: crashed / timeout) -> trial -> collect()
#include "kforge/evaluators/program.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "evaluators/runner/pool_options.hpp"
#include "evaluators/runner/runner.hpp"
#include "evaluators/runner/timing_options.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/problem.hpp"
#include "kforge/program.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

const char* const worker_script = "kforge/triton/program_worker.py";

// The repository's python/ folder: $KFORGE_SOURCE_DIR/python, else the first python/ beside or above the
// folder of this program (build/kforge, .device/bin/kforge).
std::filesystem::path python_dir() {
  auto has_worker = [](const std::filesystem::path& d) {
    std::error_code ec;
    return std::filesystem::exists(d / worker_script, ec);
  };
  if (const char* e = std::getenv("KFORGE_SOURCE_DIR");
      e && *e && has_worker(std::filesystem::path(e) / "python"))
    return std::filesystem::path(e) / "python";
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  std::filesystem::path d = std::filesystem::path(buf).parent_path();
  for (int up = 0; up < 4 && !d.empty(); ++up, d = d.parent_path())
    if (has_worker(d / "python")) return d / "python";
  return {};
}

std::filesystem::path default_cache_dir() {
  if (const char* e = std::getenv("KFORGE_CACHE"); e && *e) return e;
  if (const char* h = std::getenv("XDG_CACHE_HOME"); h && *h) return std::filesystem::path(h) / "kforge";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kforge";
  return std::filesystem::temp_directory_path() / "kforge-cache";
}

constexpr double default_compile_timeout_s = 60.0;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

struct program_options {
  std::string python;
  std::filesystem::path worker;  // program_worker.py
  std::vector<std::string> worker_args;
  std::filesystem::path cache_dir;
  runner_options run;
  bool all_devices = true;
  json timing;
  bool profile = true;
  int profile_calls = 5;
  double compile_timeout_s = default_compile_timeout_s;
  std::vector<std::string> metrics;

  static program_options parse(const options& o, const evaluator_context& ctx) {
    program_options p;
    const auto dir = python_dir();
    if (dir.empty())
      o.where().fail("cannot find python/" + std::string(worker_script) +
                     " (set KFORGE_SOURCE_DIR to the repository)");
    p.worker = dir / worker_script;
    if (o.has("python")) {
      p.python = o.string("python");
    } else if (const char* e = std::getenv("KFORGE_PYTHON"); e && *e) {
      p.python = e;
    } else {
      p.python = "python3";  // the GPU machine's, with torch and triton (<repo>/.venv has no torch)
    }
    if (o.has("worker_args")) p.worker_args = o.json("worker_args").get<std::vector<std::string>>();
    p.cache_dir = o.has("cache_dir")
                      ? std::filesystem::path(resolve_path(o.string("cache_dir"), ctx.base_dir))
                      : default_cache_dir();
    p.all_devices = read_pool_options(o, p.run);
    p.run.command = {p.python,   p.worker.string(), "--device",
                     "{device}", "--cache",         (p.cache_dir / "programs").string()};
    p.run.command.insert(p.run.command.end(), p.worker_args.begin(), p.worker_args.end());
    p.run.log_dir = ctx.run_dir.empty() ? p.cache_dir / "logs" : ctx.run_dir / "workers";
    p.timing = {{"warmup", o.integer("warmup")},
                {"min_repeats", o.integer("min_repeats")},
                {"max_repeats", o.integer("max_repeats")},
                {"target_rel_ci", o.real("target_rel_ci")},
                {"max_seconds", o.real("max_timing_seconds")},
                {"flush_l2", o.boolean("flush_l2")}};
    check_timing_options(o);
    p.profile = o.boolean("profile");
    p.profile_calls = static_cast<int>(o.integer("profile_calls"));
    p.compile_timeout_s = std::min(default_compile_timeout_s, p.run.request_timeout_s / 2);
    if (o.has("compile_timeout_s")) {
      p.compile_timeout_s = o.real("compile_timeout_s");
      if (p.compile_timeout_s < 0) o.fail("compile_timeout_s", "must be >= 0 (0: no limit)");
      if (p.compile_timeout_s > 0 && p.compile_timeout_s >= p.run.request_timeout_s)
        o.fail("compile_timeout_s",
               "must be below request_timeout_s (" + seconds_text(p.run.request_timeout_s) +
                   "), or a slow compile kills the worker instead of failing the variant");
    }
    if (o.has("metrics")) {
      p.metrics = o.json("metrics").get<std::vector<std::string>>();
      if (!p.profile) o.fail("metrics", "set profile: true to collect them");
    }
    return p;
  }
};

// The command that prints how many GPUs the worker's Python sees (torch.cuda.device_count()).
std::string count_command(const program_options& p) {
  std::string cmd = "'" + p.python + "' '" + p.worker.string() + "' --count";
  for (const auto& a : p.worker_args)
    if (a == "--fake") cmd += " --fake";
  return cmd;
}

class program_evaluator final : public async_evaluator {
 public:
  program_evaluator(std::shared_ptr<const program_spec> spec, program_options o)
      : spec_(std::move(spec)), opt_(std::move(o)) {
    if (opt_.all_devices)
      use_every_visible_device(
          opt_.run, count_command(opt_),
          "no GPU is visible to " + opt_.python +
              " (torch.cuda.device_count() is 0, or torch is missing); the program evaluator "
              "needs one (or worker_args: [--fake] for tests)");
    runner_ = std::make_unique<runner>(opt_.run,
                                       runner::callbacks{[this](run_outcome r) { on_outcome(std::move(r)); },
                                                         [this] { on_runner_failure(); }});
    const auto hello = runner_->greeting();
    device_ = hello.value("name", "");
    for (const auto& w : runner_->describe())
      worker_names_.push_back(w.value("name", ""));
    base_ = {{"op", "evaluate"},
             {"program", spec_->program.string()},
             {"call", spec_->call},
             {"inputs", {{"file", spec_->inputs_file.string()}, {"function", spec_->inputs_function}}},
             {"time_shapes", spec_->time_shapes},
             {"seed", spec_->seed},
             {"timing", opt_.timing},
             {"profile", opt_.profile},
             {"profile_calls", opt_.profile_calls},
             {"compile_timeout_s", opt_.compile_timeout_s},
             {"metrics", opt_.metrics}};
    if (!spec_->end_marker.empty()) base_["end_marker"] = spec_->end_marker;
    if (!spec_->adapter_file.empty())
      base_["adapter"] = {{"file", spec_->adapter_file.string()}, {"function", spec_->adapter_function}};
    json tol = json::object();
    for (const auto& [dt, t] : spec_->tolerances)
      tol[std::string(to_string(dt))] = {{"rel", t.rel}, {"abs", t.abs}};
    base_["tolerances"] = std::move(tol);
  }

  ~program_evaluator() override { runner_.reset(); }

  void submit(std::vector<evaluation_request> requests) override {
    if (auto f = runner_->failure(); !f.empty()) throw error(f);
    throw_if_the_original_failed();
    for (auto& r : requests) {
      json m = base_;
      m["id"] = r.sequence;
      m["knobs"] = program_knobs(*spec_, r.cfg);
      {
        std::lock_guard lk(mu_);
        trial t;
        t.sequence = r.sequence;
        t.cfg = r.cfg;
        t.batch = r.batch;
        jobs_.emplace(r.sequence, std::move(t));
      }
      runner_->submit(r.sequence, std::move(m));
    }
  }

  std::vector<trial> collect(bool wait) override {
    std::vector<trial> out;
    {
      std::unique_lock lk(mu_);
      if (wait) cv_.wait(lk, [&] { return !done_.empty() || jobs_.empty() || runner_failed_; });
      out.swap(done_);
      if (!out.empty()) return out;  // the trials first (a failed original's among them), then the error
      if (!original_failure_.empty())
        throw error("the original program cannot serve as the reference, so no variant can be checked: " +
                    original_failure_);
      if (!runner_failed_) return out;
    }
    throw error(runner_->failure());
  }

  std::size_t in_flight() const override {
    std::lock_guard lk(mu_);
    return jobs_.size() + done_.size();
  }

  /// One queued request per worker beyond the running one: a worker that finishes starts the next at once.
  std::size_t parallelism() const override { return runner_->size() * 2; }

  nlohmann::json describe() const override {
    return {{"type", "program"},
            {"device", device_},
            {"program", spec_->program.string()},
            {"call", spec_->call},
            {"python", opt_.python},
            {"worker", opt_.worker.string()},
            {"workers", runner_->describe()},
            {"kernel_time", opt_.profile ? "CUPTI activity records through torch.profiler" : "off"}};
  }
  bool simulated_clock() const override { return false; }

 private:
  void on_outcome(run_outcome o) {
    std::lock_guard lk(mu_);
    auto it = jobs_.find(o.id);
    if (it == jobs_.end()) return;
    trial t = std::move(it->second);
    jobs_.erase(it);
    const auto& name = o.worker < worker_names_.size() ? worker_names_[o.worker] : device_;
    t.device = "cuda:" + std::to_string(o.device) + (name.empty() ? "" : " " + name);
    if (o.losses > 0) t.metrics["worker_losses"] = o.losses;
    if (o.answer.is_null()) {
      t.st = o.lost;
      t.error = o.error;
    } else {
      read_answer(o.answer, t);
      // A worker whose setup failed (the original does not run, or does not reproduce itself) fails
      // every variant the same way: the run stops after recording the trials that came back.
      if (o.answer.value("original_failed", false) && original_failure_.empty())
        original_failure_ = t.error.empty() ? "(no message)" : t.error;
      t.cost.framework =
          std::max(0.0, o.on_worker_s - t.cost.compile - t.cost.check - t.cost.benchmark - t.cost.profile);
      t.metrics["kforge.queue_s"] = o.queue_s;
      if (o.losses > 0 && !t.ok() && t.error.empty()) t.error = "after a lost worker (" + o.first_loss + ")";
    }
    done_.push_back(std::move(t));
    cv_.notify_all();
  }

  static void read_answer(const json& a, trial& t) {
    const auto st = status_from_string(a.value("status", std::string("crashed")));
    t.st = st ? *st : status::crashed;
    t.error = a.value("error", std::string());
    if (!st) t.error = "unknown status from the worker: " + a.value("status", std::string()) + "; " + t.error;
    auto num = [&](const char* k) {
      const auto it = a.find(k);
      return it != a.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    t.cost.compile = num("compile_s");
    t.cost.check = num("check_s");
    t.cost.benchmark = num("benchmark_s");
    t.cost.profile = num("profile_s");
    if (const auto m = a.find("metrics"); m != a.end() && m->is_object())
      for (const auto& [k, v] : m->items())
        if (v.is_number()) t.metrics[k] = v.get<double>();
    if (t.ok()) {
      const auto times = a.find("times_ms");
      if (times == a.end() || !times->is_array() || times->empty()) {
        t.st = status::crashed;
        t.error = "the worker answered ok without times";
        return;
      }
      for (const auto& x : *times)
        t.times_ms.push_back(x.is_number() ? x.get<double>() : trial::nan);
      const auto s = summarize(t.times_ms);
      t.time_ms = s.median;
      t.time_iqr_ms = s.iqr;
      t.time_min_ms = s.min;
    }
    if (a.value("notes", std::string()) != "") t.metrics.emplace("note.kernel_activity_unavailable", 1.0);
  }

  void throw_if_the_original_failed() {
    std::lock_guard lk(mu_);
    if (!original_failure_.empty())
      throw error("the original program cannot serve as the reference, so no variant can be checked: " +
                  original_failure_);
  }

  void on_runner_failure() {
    std::lock_guard lk(mu_);
    runner_failed_ = true;
    cv_.notify_all();
  }

  std::shared_ptr<const program_spec> spec_;
  program_options opt_;
  std::unique_ptr<runner> runner_;
  std::string device_;
  std::vector<std::string> worker_names_;
  json base_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, trial> jobs_;  // by sequence: queued or running
  std::vector<trial> done_;
  bool runner_failed_ = false;
  std::string original_failure_;  // the first answer with original_failed: the run stops
};

}  // namespace

void register_program_evaluator() {
  evaluator_registry().add({
      "program",
      "runs variants of a Triton program (problem: {program: ...}) through its Python wrapper in program "
      "workers (Python processes per GPU, python/kforge/triton/program_worker.py): every output compared "
      "with the original program's, the call timed with CUDA events, kernels' time from CUPTI activity",
      join_option_specs(
          {pool_option_specs(120.0,
                             "a worker silent this long is killed (the first call of a variant compiles its "
                             "kernels)"),
           {optional_option("python", option_type::string,
                            "the Python with torch and triton (default: $KFORGE_PYTHON, else python3)"),
            optional_option("cache_dir", option_type::string,
                            "variants' sources and logs (default ~/.cache/kforge or $KFORGE_CACHE)"),
            optional_option("worker_args", option_type::list,
                            "extra arguments of the worker (tests use --fake)")},
           timing_option_specs("call", "calls",
                               "a buffer of 256 MiB or twice the L2, whichever is larger (as "
                               "triton.testing.do_bench does: the flush's time on the GPU also hides the "
                               "launch of a short Python call, as there)"),
           {
               bool_option("profile", true,
                           "the kernels' own time from CUPTI activity records (torch.profiler)"),
               int_option("profile_calls", 5, "calls recorded for the kernels' time", 1, 1000),
               optional_option("compile_timeout_s", option_type::real,
                               "seconds: a candidate whose kernels take longer to compile is a timeout trial "
                               "and the worker goes on (Triton's compile in a forked child, "
                               "kforge.triton.bounded_compile); 0: no limit but request_timeout_s (default: "
                               "60, or half of request_timeout_s where that is less)"),
               optional_option("metrics", option_type::list,
                               "CUPTI metrics of the call's kernels (kforge's range profiler, "
                               "libkforge_cupti.so): counts "
                               "summed over the kernels, rates and percentages weighted by their durations"),
           }}),
      [](const options& o, const evaluator_context& ctx) -> evaluator {
        if (!ctx.prob.program_desc)
          o.where().fail(
              "the program evaluator needs a program-level problem: problem: {program: file.py, call: "
              "wrapper, "
              "inputs: file.py:function, parameters: [...]}");
        return evaluator(
            std::make_unique<program_evaluator>(ctx.prob.program_desc, program_options::parse(o, ctx)));
      },
  });
}

}  // namespace kf
