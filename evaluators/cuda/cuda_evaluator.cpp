// The cuda evaluator: a builder (variants -> module images) feeding a runner (worker processes that
// check, time and profile images on GPUs). Neither half knows the other; this file joins them.
//
//   submit(requests) -> builder.submit --take--> failed build: a trial (invalid, compile_failed)
//                                           \--> built image: runner.submit(evaluate request)
//   runner outcome (answer, or the worker lost) -> trial -> collect()
//
// Options: cuda_options below (the single source of names, defaults and documentation; `kforge plugins`).
#include "kforge/evaluators/cuda.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "evaluators/cuda/builder.hpp"
#include "evaluators/cuda/protocol.hpp"
#include "evaluators/runner/pool_options.hpp"
#include "evaluators/runner/runner.hpp"
#include "evaluators/runner/timing_options.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/kernel.hpp"
#include "kforge/problem.hpp"

namespace kf {

const std::vector<std::string>& default_metrics() {
  static const std::vector<std::string> m = {
      "gpu__time_duration.sum",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "sm__cycles_elapsed.avg.per_second",
      "sm__cycles_active.avg",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "smsp__inst_executed.sum",
      "l1tex__t_sector_hit_rate.pct",
      "lts__t_sectors_lookup_hit.sum",
      "sm__inst_executed_pipe_tensor_op_gmma.sum",
  };
  return m;
}

const std::vector<std::string>& deep_metrics() {
  static const std::vector<std::string> m = {
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "lts__t_sector_hit_rate.pct",
      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
      "smsp__warps_issue_stalled_long_scoreboard.sum",
      "smsp__warps_issue_stalled_barrier.sum",
      "sm__inst_executed_pipe_fma.sum",
      "sm__inst_executed_pipe_lsu.sum",
  };
  return m;
}

std::filesystem::path cuda_cache_dir() {
  if (const char* e = std::getenv("KFORGE_CACHE"); e && *e) return e;
  if (const char* h = std::getenv("XDG_CACHE_HOME"); h && *h) return std::filesystem::path(h) / "kforge";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kforge";
  return std::filesystem::temp_directory_path() / "kforge-cache";
}

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

std::filesystem::path default_worker_path() {
  if (const char* e = std::getenv("KFORGE_WORKER"); e && *e) return e;
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = 0;
    return std::filesystem::path(buf).parent_path() / "kforge-worker";
  }
  return "kforge-worker";
}

// The repository's python/ folder (kforge.triton's compile server): $KFORGE_SOURCE_DIR/python, else the
// first python/ beside or above the folder of this program (build/kforge, .device/bin/kforge).
std::filesystem::path repository_python_dir() {
  auto has_server = [](const std::filesystem::path& d) {
    std::error_code ec;
    return std::filesystem::exists(d / "kforge/triton/compile_server.py", ec);
  };
  if (const char* e = std::getenv("KFORGE_SOURCE_DIR");
      e && *e && has_server(std::filesystem::path(e) / "python"))
    return std::filesystem::path(e) / "python";
  std::filesystem::path d = default_worker_path().parent_path();
  for (int up = 0; up < 4 && !d.empty(); ++up, d = d.parent_path())
    if (has_server(d / "python")) return d / "python";
  return {};
}

// The Python that runs Triton's compiler: $KFORGE_PYTHON, else <repo>/.venv/bin/python, else python3.
std::string default_python(const std::filesystem::path& python_dir) {
  if (const char* e = std::getenv("KFORGE_PYTHON"); e && *e) return e;
  std::error_code ec;
  if (!python_dir.empty() && std::filesystem::exists(python_dir.parent_path() / ".venv/bin/python", ec))
    return (python_dir.parent_path() / ".venv/bin/python").string();
  return "python3";
}

// The evaluator's options, parsed once from the option table in register_cuda_evaluator().
struct cuda_options {
  nvrtc_builder_options build;
  triton_builder_options triton;
  runner_options run;
  std::filesystem::path worker;  ///< the kforge-worker program
  std::vector<std::string> worker_args;
  bool all_devices = true;  ///< no `devices` given: every visible GPU
  gpu::timing_params timing;
  gpu::watchdog_params watchdog;
  bool profile = true;
  std::vector<std::string> metrics, deep_metrics;

  static cuda_options parse(const options& o, const evaluator_context& ctx) {
    cuda_options c;
    c.build.cache_dir = o.has("cache_dir")
                            ? std::filesystem::path(resolve_path(o.string("cache_dir"), ctx.base_dir))
                            : cuda_cache_dir();
    c.build.arch = o.string("arch");
    c.build.threads = static_cast<std::size_t>(o.integer("compile_threads") > 0
                                                   ? o.integer("compile_threads")
                                                   : std::max(1u, std::thread::hardware_concurrency()));
    c.build.static_filter = o.boolean("static_filter");
    c.triton.cache_dir = c.build.cache_dir / "triton";
    c.triton.processes = c.build.threads;
    c.triton.static_filter = c.build.static_filter;
    c.triton.python_path = repository_python_dir();
    c.triton.python = o.has("python") ? o.string("python") : default_python(c.triton.python_path);
    const auto& arch = c.build.arch;
    if (arch.rfind("sm_", 0) == 0 && arch.size() >= 5) c.triton.arch = std::atoi(arch.c_str() + 3);
    c.worker = o.has("worker") ? std::filesystem::path(resolve_path(o.string("worker"), ctx.base_dir))
                               : default_worker_path();
    if (!std::filesystem::exists(c.worker))
      o.fail("worker",
             "the worker program " + c.worker.string() + " does not exist (build target kforge-worker)");
    if (o.has("worker_args")) c.worker_args = o.json("worker_args").get<std::vector<std::string>>();
    c.all_devices = read_pool_options(o, c.run);
    c.run.command = {c.worker.string(), "--device", "{device}", "--cache",
                     (c.build.cache_dir / "nvrtc").string()};
    if (o.boolean("compile_processes")) c.build.compile_process = {c.worker.string()};
    c.run.command.insert(c.run.command.end(), c.worker_args.begin(), c.worker_args.end());
    c.run.log_dir = ctx.run_dir.empty() ? c.build.cache_dir / "logs" : ctx.run_dir / "workers";
    c.triton.log_dir = c.run.log_dir / "triton";
    c.timing.warmup = static_cast<int>(o.integer("warmup"));
    c.timing.min_repeats = static_cast<int>(o.integer("min_repeats"));
    c.timing.max_repeats = static_cast<int>(o.integer("max_repeats"));
    check_timing_options(o);
    c.timing.target_rel_ci = o.real("target_rel_ci");
    c.timing.max_seconds = o.real("max_timing_seconds");
    c.timing.flush_l2 = o.boolean("flush_l2");
    c.timing.timer = o.string("timer");
    c.timing.min_batch_us = o.real("min_batch_us");
    c.watchdog.min_ms = o.real("watchdog_min_ms");
    c.watchdog.factor = o.real("watchdog_factor");
    c.profile = o.boolean("profile");
    c.metrics = o.has("metrics") ? o.json("metrics").get<std::vector<std::string>>() : default_metrics();
    if (o.boolean("deep_profile"))
      c.deep_metrics =
          o.has("deep_metrics") ? o.json("deep_metrics").get<std::vector<std::string>>() : kf::deep_metrics();
    else if (o.has("deep_metrics"))
      o.fail("deep_metrics", "set deep_profile: true to collect them");
    return c;
  }
};

class cuda_evaluator final : public async_evaluator {
 public:
  cuda_evaluator(std::shared_ptr<const kernel_spec> spec, cuda_options o)
      : spec_(std::move(spec)), opt_(std::move(o)) {
    if (opt_.all_devices)
      use_every_visible_device(
          opt_.run, "'" + opt_.worker.string() + "' --count",
          "no GPU is visible to " + opt_.worker.string() +
              " (no driver, or CUDA_VISIBLE_DEVICES hides every device); the cuda evaluator "
              "needs one");
    // Callbacks run on the runner's thread holding its lock: they take mu_, so nothing here calls the
    // runner while holding mu_.
    runner_ = std::make_unique<runner>(opt_.run,
                                       runner::callbacks{[this](run_outcome r) { on_outcome(std::move(r)); },
                                                         [this] { on_runner_failure(); }});
    const auto hello = gpu::worker_info_from_json(runner_->greeting());
    device_ = hello.name;
    for (const auto& w : runner_->describe())
      worker_names_.push_back(w.value("name", ""));
    if (!hello.profiling) profiling_note_ = hello.profiling_note;
    builder_ = spec_->language == "triton" ? make_triton_builder(spec_, opt_.triton, hello.limits)
                                           : make_nvrtc_builder(spec_, opt_.build, hello.limits);
    feeder_ = std::thread([this] { feed(); });
  }

  ~cuda_evaluator() override {
    stop_ = true;
    if (feeder_.joinable()) feeder_.join();
    runner_.reset();  // stops the workers before the builder's files go
  }

  void submit(std::vector<evaluation_request> requests) override {
    if (auto f = runner_->failure(); !f.empty()) throw error(f);
    for (auto& r : requests) {
      {
        std::lock_guard lk(mu_);
        trial t;
        t.sequence = r.sequence;
        t.cfg = r.cfg;
        t.batch = r.batch;
        jobs_.emplace(r.sequence, job{std::move(t), clock_type::now()});
        ++outstanding_;
      }
      builder_->submit(r.sequence, r.cfg, r.sequence + 1);  // blocks while the builder is full
    }
  }

  std::vector<trial> collect(bool wait) override {
    std::vector<trial> out;
    {
      std::unique_lock lk(mu_);
      if (wait) cv_.wait(lk, [&] { return !done_.empty() || outstanding_ == 0 || runner_failed_; });
      out.swap(done_);
      if (!out.empty() || !runner_failed_) return out;
    }
    throw error(runner_->failure());
  }

  std::size_t in_flight() const override {
    std::lock_guard lk(mu_);
    return outstanding_ + done_.size();
  }

  /// Enough proposals in flight to keep every compile thread and every worker busy.
  std::size_t parallelism() const override {
    return std::max<std::size_t>(runner_->size() * 2, builder_->parallelism());
  }

  nlohmann::json describe() const override {
    json d = {{"type", "cuda"},
              {"device", device_},
              {"kernel", spec_->name},
              {"workers", runner_->describe()},
              {"profiling", profiling_note_.empty() ? std::string("on") : "off: " + profiling_note_},
              {"metrics", opt_.profile ? json(opt_.metrics) : json::array()}};
    d.update(builder_->describe());
    return d;
  }
  bool simulated_clock() const override { return false; }

 private:
  struct job {
    trial t;  // sequence, configuration; static metrics and compile cost once built
    clock_type::time_point submitted;
  };

  // The feeder: finished builds become trials (failures) or runner jobs.
  void feed() {
    while (!stop_) {
      auto built = builder_->take(std::chrono::milliseconds(20));
      if (!built) continue;
      std::unique_lock lk(mu_);
      auto it = jobs_.find(built->id);
      if (it == jobs_.end()) continue;
      trial& t = it->second.t;
      t.cost.compile = built->seconds;
      for (auto& [k, v] : built->metrics)
        t.metrics[k] = v;
      if (built->st != status::ok) {
        t.st = built->st;
        t.error = std::move(built->error);
        finish(it);
        continue;
      }
      const auto message = gpu::to_json(request_for(*built));
      lk.unlock();
      runner_->submit(built->id, message);
    }
  }

  gpu::evaluate_request request_for(build_result& b) const {
    // Caller holds mu_ (best_ms_).
    gpu::evaluate_request r;
    r.id = b.id;
    r.candidate = b.image;
    r.reference = builder_->reference();
    r.shapes = std::move(b.shapes);
    // The first timed shape is profiled.
    for (auto& s : r.shapes)
      if (s.time && opt_.profile) {
        s.profile = true;
        break;
      }
    r.tolerances = spec_->tolerances;
    r.timing = opt_.timing;
    r.watchdog = opt_.watchdog;
    r.metrics = opt_.profile ? opt_.metrics : std::vector<std::string>{};
    r.deep_metrics = opt_.profile ? opt_.deep_metrics : std::vector<std::string>{};
    r.deep_if_faster_than_ms = std::isfinite(best_ms_) ? best_ms_ : 1e300;  // JSON has no infinity
    return r;
  }

  // A runner outcome becomes the job's trial.
  void on_outcome(run_outcome o) {
    std::lock_guard lk(mu_);
    auto it = jobs_.find(o.id);
    if (it == jobs_.end()) return;
    trial& t = it->second.t;
    const auto& name = o.worker < worker_names_.size() ? worker_names_[o.worker] : device_;
    t.device = "cuda:" + std::to_string(o.device) + (name.empty() ? "" : " " + name);
    if (o.losses > 0) t.metrics["worker_losses"] = o.losses;
    if (o.answer.is_null()) {
      t.st = o.lost;
      t.error = o.error;
      finish(it);
      return;
    }
    gpu::evaluate_response r;
    try {
      r = gpu::response_from_json(o.answer);
    } catch (const std::exception& e) {
      t.st = status::crashed;
      t.error = std::string("unreadable answer from the worker: ") + e.what();
      finish(it);
      return;
    }
    t.st = r.st;
    t.error = with_argument_names(r.error);
    if (t.ok()) {
      const auto s = summarize(r.times_ms);
      t.times_ms = r.times_ms;
      t.time_ms = s.median;
      t.time_iqr_ms = s.iqr;
      t.time_min_ms = s.min;
    }
    for (auto& [k, v] : r.metrics)
      t.metrics[k] = v;
    t.sm_clock_mhz = r.sm_clock_mhz;
    t.cost.check = r.check_s;
    t.cost.benchmark = r.benchmark_s;
    t.cost.profile = r.profile_s;
    // Framework: the worker round trip (IPC, module load) beyond its stages. Waiting in the queue for a
    // free worker is not a cost of this variant and is recorded apart.
    t.cost.framework = std::max(0.0, o.on_worker_s - r.check_s - r.benchmark_s - r.profile_s);
    t.metrics["kforge.queue_s"] = o.queue_s;
    if (!r.notes.empty()) t.metrics.emplace("note.profiling_unavailable", 1.0), profiling_note_ = r.notes;
    if (o.losses > 0 && !t.ok() && t.error.empty()) t.error = "after a lost worker (" + o.first_loss + ")";
    finish(it);
  }

  void on_runner_failure() {
    std::lock_guard lk(mu_);
    runner_failed_ = true;
    cv_.notify_all();
  }

  // "argument #i" in a worker's message -> the argument's name.
  std::string with_argument_names(std::string e) const {
    for (std::size_t i = 0; i < spec_->args.size(); ++i) {
      const std::string tag = "argument #" + std::to_string(i) + ":";
      if (auto pos = e.find(tag); pos != std::string::npos)
        e.replace(pos, tag.size(), "output '" + spec_->args[i].name + "':");
    }
    return e;
  }

  void finish(std::map<std::uint64_t, job>::iterator it) {
    // Caller holds mu_.
    trial t = std::move(it->second.t);
    jobs_.erase(it);
    if (t.ok() && t.time_ms < best_ms_) best_ms_ = t.time_ms;
    done_.push_back(std::move(t));
    if (outstanding_ > 0) --outstanding_;
    cv_.notify_all();
  }

  std::shared_ptr<const kernel_spec> spec_;
  cuda_options opt_;
  std::unique_ptr<runner> runner_;
  std::unique_ptr<builder> builder_;
  std::string device_;
  std::vector<std::string> worker_names_;  // by runner slot
  std::string profiling_note_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, job> jobs_;  // by sequence: building, queued or running
  std::vector<trial> done_;
  std::size_t outstanding_ = 0;
  double best_ms_ = INFINITY;
  bool runner_failed_ = false;
  std::atomic<bool> stop_{false};
  std::thread feeder_;
};

}  // namespace

void register_cuda_evaluator() {
  evaluator_registry().add({
      "cuda",
      "compiles variants of a kernel (a kforge kernel description in CUDA C++ or Triton, or a T1 file's CUDA "
      "kernel) with NVRTC or Triton and checks, times and profiles them on GPUs (worker processes per GPU)",
      join_option_specs(
          {pool_option_specs(300.0, "a worker silent this long is killed"),
           {int_option("compile_threads", 0, "NVRTC threads or Triton compile processes (0: one per core)", 0,
                       1024),
            bool_option("compile_processes", true,
                        "NVRTC compilations in kforge-worker child processes (NVRTC parses one process's "
                        "sources one at a time: header-heavy kernels compile in parallel only this way)"),
            optional_option(
                "python", option_type::string,
                "the Python with triton for Triton kernels (default: $KFORGE_PYTHON, <repo>/.venv, python3)"),
            string_option("arch", "sm_90",
                          "the architecture compiled for (a kernel description's own `arch` overrides it)"),
            optional_option("cache_dir", option_type::string,
                            "compile cache (default ~/.cache/kforge or $KFORGE_CACHE)"),
            optional_option("worker", option_type::string,
                            "the kforge-worker program (default: next to kforge)"),
            optional_option("worker_args", option_type::list,
                            "extra arguments of the worker (tests use --fake)")},
           timing_option_specs("launch", "launches", "a buffer of twice the L2"),
           {string_option("timer", "events", "events (CUDA events) or cupti (activity records)",
                          {"events", "cupti"}),
            real_option("min_batch_us", 0.0, "launches shorter than this are timed in batches (0: never)", 0,
                        1e6),
            real_option("watchdog_min_ms", 2000.0, "a launch may always run this long", 1, 3.6e6),
            real_option("watchdog_factor", 100.0, "... or this many times the reference's time", 1, 1e6),
            bool_option("profile", true, "collect CUPTI metrics (profiling runs apart from timing runs)"),
            optional_option("metrics", option_type::list, "CUPTI metric names (default: a 1-pass set)"),
            bool_option("deep_profile", false,
                        "also collect a deeper, multi-pass metric set for each new best (about 0.5 s each on "
                        "an H200)"),
            optional_option("deep_metrics", option_type::list,
                            "the deeper set (default: SM and memory throughput, L2 hit rate, stalls)"),
            bool_option(
                "static_filter", true,
                "variants that cannot launch by their static resources are invalid without a GPU run")}}),
      [](const options& o, const evaluator_context& ctx) -> evaluator {
        if (!ctx.prob.kernel_desc) {
          if (ctx.prob.kernel_error) std::rethrow_exception(ctx.prob.kernel_error);
          o.where().fail(
              "the cuda evaluator needs a kernel: problem: {kernel: file.yaml} (a kforge kernel description) "
              "or "
              "{t1: file.json} whose KernelSpecification names a CUDA kernel");
        }
        return evaluator(std::make_unique<cuda_evaluator>(ctx.prob.kernel_desc, cuda_options::parse(o, ctx)));
      },
  });
}

}  // namespace kf
