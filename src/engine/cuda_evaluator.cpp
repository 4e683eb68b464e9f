#include "kforge/cuda_evaluator.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/gpu_protocol.hpp"
#include "kforge/compile.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/kernel.hpp"
#include "kforge/problem.hpp"

extern char** environ;

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

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

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

std::filesystem::path default_cache_dir() {
  if (const char* e = std::getenv("KFORGE_CACHE"); e && *e) return e;
  if (const char* h = std::getenv("XDG_CACHE_HOME"); h && *h) return std::filesystem::path(h) / "kforge";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kforge";
  return std::filesystem::temp_directory_path() / "kforge-cache";
}

// One worker process: its pipes, and the job it is running.
struct worker_proc {
  int device = 0;
  pid_t pid = -1;
  int to_worker = -1, from_worker = -1;
  std::string inbox;  // partial line read so far
  bool busy = false;
  std::uint64_t job = 0;
  clock_type::time_point deadline;
  gpu::worker_info info;
  int restarts = 0;
  bool broken = false;  // could not start
  std::string broken_reason;
  std::filesystem::path log;
  double busy_s = 0;  // time spent on requests (dispatch to answer), for the utilisation
};

struct job {
  trial t;  // template: sequence, cfg, static metrics, compile cost
  gpu::evaluate_request request;
  clock_type::time_point submitted;
  clock_type::time_point dispatched;  // sent to a worker
  int attempts = 0;                   // dispatches that ended with the worker lost
  std::string first_loss;             // why the worker was lost the first time (kept when a retry succeeds)
};
}  // namespace

class cuda_evaluator final : public async_evaluator {
 public:
  cuda_evaluator(std::shared_ptr<const kernel_spec> spec, const options& o, const evaluator_context& ctx);
  ~cuda_evaluator() override;

  void submit(std::vector<evaluation_request> requests) override;
  std::vector<trial> collect(bool wait) override;
  std::size_t in_flight() const override;
  /// Enough proposals per batch to keep every compile thread and every worker busy.
  std::size_t parallelism() const override {
    return std::max<std::size_t>(std::max<std::size_t>(1, workers_.size()) * 2, compile_threads_);
  }
  nlohmann::json describe() const override;
  bool simulated_clock() const override { return false; }

 private:
  void loop();
  bool start_worker(worker_proc& w);
  void stop_worker(worker_proc& w, bool kill_it);
  void finish(std::uint64_t id, trial t);
  void on_response(worker_proc& w, const std::string& line);
  void on_worker_lost(worker_proc& w, status st, const std::string& why);
  void dispatch();
  std::vector<gpu::shape_job> shapes_for(const config& c, std::uint64_t seed) const;
  std::string write_cubin(const compile_result& r) const;
  int count_devices() const;
  void fatal_check_locked();

  std::shared_ptr<const kernel_spec> spec_;
  std::filesystem::path cache_dir_, worker_path_, log_dir_;
  std::unique_ptr<compiler> compiler_;
  std::unique_ptr<compile_pool> pool_;
  std::vector<worker_proc> workers_;
  device_limits limits_;
  std::string arch_ = "sm_90";
  std::string reference_module_, reference_function_;
  gpu::timing_params timing_;
  gpu::watchdog_params watchdog_;
  std::vector<std::string> metrics_, deep_metrics_;
  bool profile_ = true;
  bool static_filter_ = true;
  double driver_timeout_s_ = 120;
  int retry_lost_ = 1;  // dispatches again after a worker died unannounced
  std::string profiling_note_;
  std::vector<std::string> worker_args_;
  std::size_t compile_threads_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<compile_pool::ticket, job> compiling_;
  // Results whose ticket submit() has not registered yet (a fast compile can finish first).
  std::map<compile_pool::ticket, compile_result> orphans_;
  std::deque<std::pair<compile_pool::ticket, compile_result>> compiled_;  // orphans now registered
  std::deque<job> ready_;
  std::map<std::uint64_t, job> running_;
  std::vector<trial> done_;
  std::size_t outstanding_ = 0;
  double best_ms_ = INFINITY;
  std::atomic<bool> stop_{false};
  std::string fatal_error_;
  std::thread thread_;
};

cuda_evaluator::cuda_evaluator(std::shared_ptr<const kernel_spec> spec, const options& o,
                               const evaluator_context& ctx)
    : spec_(std::move(spec)) {
  // A worker that dies closes its pipe: writing to it must fail with EPIPE, not kill kforge.
  ::signal(SIGPIPE, SIG_IGN);
  cache_dir_ = o.has("cache_dir") ? std::filesystem::path(resolve_path(o.string("cache_dir"), ctx.base_dir))
                                  : default_cache_dir();
  worker_path_ = o.has("worker") ? std::filesystem::path(resolve_path(o.string("worker"), ctx.base_dir))
                                 : default_worker_path();
  if (o.has("worker_args")) worker_args_ = o.json("worker_args").get<std::vector<std::string>>();
  if (!std::filesystem::exists(worker_path_))
    o.fail("worker",
           "the worker program " + worker_path_.string() + " does not exist (build target kforge-worker)");
  log_dir_ = ctx.run_dir.empty() ? cache_dir_ / "logs" : ctx.run_dir / "workers";
  std::filesystem::create_directories(cache_dir_ / "cubin");
  std::filesystem::create_directories(log_dir_);
  arch_ = o.string("arch");
  timing_.warmup = static_cast<int>(o.integer("warmup"));
  timing_.min_repeats = static_cast<int>(o.integer("min_repeats"));
  timing_.max_repeats = static_cast<int>(o.integer("max_repeats"));
  timing_.target_rel_ci = o.real("target_rel_ci");
  timing_.max_seconds = o.real("max_timing_seconds");
  timing_.flush_l2 = o.boolean("flush_l2");
  timing_.timer = o.string("timer");
  timing_.min_batch_us = o.real("min_batch_us");
  if (timing_.min_repeats > timing_.max_repeats) o.fail("min_repeats", "must not exceed max_repeats");
  watchdog_.min_ms = o.real("watchdog_min_ms");
  watchdog_.factor = o.real("watchdog_factor");
  profile_ = o.boolean("profile");
  static_filter_ = o.boolean("static_filter");
  metrics_ = o.has("metrics") ? o.json("metrics").get<std::vector<std::string>>() : default_metrics();
  if (o.boolean("deep_profile"))
    deep_metrics_ =
        o.has("deep_metrics") ? o.json("deep_metrics").get<std::vector<std::string>>() : deep_metrics();
  else if (o.has("deep_metrics"))
    o.fail("deep_metrics", "set deep_profile: true to collect them");
  driver_timeout_s_ = o.real("request_timeout_s");
  retry_lost_ = static_cast<int>(o.integer("retry_lost"));

  compiler_ = std::make_unique<compiler>(cache_dir_ / "nvrtc");
  const auto threads = static_cast<std::size_t>(o.integer("compile_threads") > 0
                                                    ? o.integer("compile_threads")
                                                    : std::max(1u, std::thread::hardware_concurrency()));
  compile_threads_ = threads;
  pool_ = std::make_unique<compile_pool>(*compiler_, threads, 2 * threads + 4);

  // The reference module.
  const auto& k = *spec_;
  compile_request ref;
  if (k.reference.k == reference_spec::kind::kernel) {
    ref.source = k.reference.source;
    ref.name = std::filesystem::path(k.reference.source_file).filename().string();
    ref.options = k.compiler_options;
    ref.options.insert(ref.options.end(), k.reference.options.begin(), k.reference.options.end());
    // The reference sees the default configuration's #defines too (it may share the kernel's source).
    if (k.injection == "defines")
      ref.source = with_defines(k, k.defaults, k.reference.source, k.reference.source_file);
    ref.name_expressions = {k.reference.entry};
  } else if (k.reference.k == reference_spec::kind::baseline) {
    const auto v = render_variant(k, k.defaults);
    ref.source = v.source;
    ref.options = v.options;
    ref.name_expressions = {v.entry};
    ref.name = std::filesystem::path(k.source_file).filename().string();
  }
  if (k.reference.k != reference_spec::kind::none) {
    ref.arch = arch_;
    const auto r = compiler_->compile(ref);
    if (!r.ok) throw error("the reference of kernel " + k.name + " does not compile:\n" + r.log);
    reference_module_ = write_cubin(r);
    reference_function_ = r.kernels.at(0).lowered_name;
  }

  // Devices and workers.
  std::vector<int> devices;
  if (o.has("devices")) {
    devices = o.json("devices").get<std::vector<int>>();
    if (devices.empty()) o.fail("devices", "give at least one device index");
  } else {
    const int n = count_devices();
    if (n <= 0)
      throw error("no GPU is visible to " + worker_path_.string() +
                  " (no driver, or CUDA_VISIBLE_DEVICES hides every device); the cuda evaluator needs one");
    for (int d = 0; d < n; ++d)
      devices.push_back(d);
  }
  const auto per_device = static_cast<int>(o.integer("workers_per_device"));
  for (int d : devices)
    for (int slot = 0; slot < per_device; ++slot) {
      worker_proc w;
      w.device = d;
      w.log = log_dir_ / ("worker-gpu" + std::to_string(d) + "-" + std::to_string(slot) + ".log");
      workers_.push_back(std::move(w));
    }
  std::string failures;
  int started = 0;
  for (auto& w : workers_) {
    if (start_worker(w))
      ++started;
    else
      failures += "\n  GPU " + std::to_string(w.device) + ": " + w.broken_reason;
  }
  if (started == 0) throw error("no GPU worker could start:" + failures);
  limits_ = workers_.front().info.limits;
  for (const auto& w : workers_)
    if (!w.broken) {
      limits_ = w.info.limits;
      profiling_note_ = w.info.profiling ? "" : w.info.profiling_note;
      break;
    }
  thread_ = std::thread([this] { loop(); });
}

int cuda_evaluator::count_devices() const {
  int fds[2];
  if (::pipe(fds) != 0) return 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const std::string path = worker_path_.string();
  std::vector<char*> argv = {const_cast<char*>(path.c_str()), const_cast<char*>("--count"), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while (rc == 0 && (n = ::read(fds[0], buf, sizeof buf)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (rc == 0) {
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  try {
    return std::stoi(out);
  } catch (...) {
    return 0;
  }
}

bool cuda_evaluator::start_worker(worker_proc& w) {
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0) {
    w.broken = true;
    w.broken_reason = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, w.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  const std::string path = worker_path_.string(), dev = std::to_string(w.device),
                    cache = (cache_dir_ / "nvrtc").string();
  std::vector<char*> argv = {const_cast<char*>(path.c_str()), const_cast<char*>("--device"),
                             const_cast<char*>(dev.c_str()), const_cast<char*>("--cache"),
                             const_cast<char*>(cache.c_str())};
  for (auto& a : worker_args_)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    w.broken = true;
    w.broken_reason = "cannot start " + path + ": " + std::strerror(rc);
    return false;
  }
  w.pid = pid;
  w.to_worker = in[1];
  w.from_worker = out[0];
  w.inbox.clear();
  w.busy = false;
  // Hello: the device's description (or why the worker cannot serve it).
  const std::string hello = "{\"op\":\"hello\"}\n";
  if (::write(w.to_worker, hello.data(), hello.size()) != static_cast<ssize_t>(hello.size())) {
    stop_worker(w, true);
    w.broken = true;
    w.broken_reason = "the worker closed its input";
    return false;
  }
  std::string line;
  const auto t0 = clock_type::now();
  while (line.empty() && seconds_since(t0) < 120) {
    pollfd p{w.from_worker, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(w.from_worker, buf, sizeof buf);
    if (n <= 0) break;
    w.inbox.append(buf, static_cast<std::size_t>(n));
    if (auto nl = w.inbox.find('\n'); nl != std::string::npos) {
      line = w.inbox.substr(0, nl);
      w.inbox.erase(0, nl + 1);
    }
  }
  try {
    const auto j = json::parse(line);
    if (j.contains("error")) throw error(j["error"].get<std::string>());
    w.info = gpu::worker_info_from_json(j);
  } catch (const std::exception& e) {
    stop_worker(w, true);
    w.broken = true;
    w.broken_reason = line.empty() ? "no answer from the worker (see " + w.log.string() + ")" : e.what();
    return false;
  }
  w.broken = false;
  return true;
}

void cuda_evaluator::stop_worker(worker_proc& w, bool kill_it) {
  if (w.pid > 0) {
    if (kill_it)
      ::kill(w.pid, SIGKILL);
    else if (w.to_worker >= 0) {
      const std::string bye = "{\"op\":\"exit\"}\n";
      (void)!::write(w.to_worker, bye.data(), bye.size());
    }
  }
  if (w.to_worker >= 0) ::close(w.to_worker);
  if (w.from_worker >= 0) ::close(w.from_worker);
  w.to_worker = w.from_worker = -1;
  if (w.pid > 0) {
    int st = 0;
    for (int i = 0; i < 200 && ::waitpid(w.pid, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (::waitpid(w.pid, &st, WNOHANG) == 0) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, &st, 0);
    }
  }
  w.pid = -1;
  w.busy = false;
}

cuda_evaluator::~cuda_evaluator() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& w : workers_)
    stop_worker(w, w.busy);
}

std::string cuda_evaluator::write_cubin(const compile_result& r) const {
  const auto path = cache_dir_ / "cubin" / (r.key + ".cubin");
  if (!std::filesystem::exists(path)) {
    const auto tmp = path.string() + ".tmp" + std::to_string(::getpid()) + "-" +
                     std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(r.cubin.data()), static_cast<std::streamsize>(r.cubin.size()));
    }
    std::filesystem::rename(tmp, path);
  }
  return path.string();
}

std::vector<gpu::shape_job> cuda_evaluator::shapes_for(const config& c, std::uint64_t seed) const {
  const auto& k = *spec_;
  std::vector<gpu::shape_job> out;
  auto add = [&](const shape& s, bool time) {
    const auto plan = resolve_launch(k, c, s);
    gpu::shape_job j;
    j.args = plan.args;
    j.candidate = {plan.grid, plan.block, plan.shared_bytes};
    if (k.reference.k == reference_spec::kind::baseline || k.reference.k == reference_spec::kind::kernel) {
      const auto ref_plan = resolve_launch(k, k.defaults, s);
      j.reference = gpu::launch_geometry{ref_plan.grid, ref_plan.block, ref_plan.shared_bytes};
    }
    j.check = k.reference.k != reference_spec::kind::none;
    j.time = time;
    j.profile = time && profile_ && out.empty();
    j.seed = seed * 131 + out.size();
    out.push_back(std::move(j));
  };
  for (const auto& s : k.check_shapes)
    add(s, false);
  for (const auto& s : k.time_shapes)
    add(s, true);
  // The first timed shape is profiled.
  bool profiled = false;
  for (auto& j : out) {
    j.profile = j.time && profile_ && !profiled;
    profiled |= j.profile;
  }
  return out;
}

void cuda_evaluator::submit(std::vector<evaluation_request> requests) {
  {
    std::lock_guard lk(mu_);
    if (!fatal_error_.empty()) throw error(fatal_error_);
  }
  const auto& k = *spec_;
  for (auto& r : requests) {
    job jb;
    jb.t.sequence = r.sequence;
    jb.t.cfg = r.cfg;
    jb.t.batch = r.batch;
    jb.submitted = clock_type::now();
    rendered_variant v;
    try {
      jb.request.shapes = shapes_for(r.cfg, r.sequence + 1);
      v = render_variant(k, r.cfg);
    } catch (const error& e) {
      jb.t.st = status::invalid;
      jb.t.error = std::string("cannot launch: ") + e.what();
      std::lock_guard lk(mu_);
      done_.push_back(std::move(jb.t));
      cv_.notify_all();
      continue;
    }
    compile_request cr;
    cr.source = std::move(v.source);
    cr.name = std::filesystem::path(k.source_file).filename().string();
    cr.options = std::move(v.options);
    cr.name_expressions = {v.entry};
    cr.arch = arch_;
    jb.request.id = r.sequence;
    {
      std::lock_guard lk(mu_);
      ++outstanding_;
    }
    const auto ticket = pool_->submit(std::move(cr));  // blocks while the pool is full
    std::lock_guard lk(mu_);
    compiling_.emplace(ticket, std::move(jb));
    if (auto o = orphans_.find(ticket); o != orphans_.end()) {
      compiled_.emplace_back(ticket, std::move(o->second));
      orphans_.erase(o);
    }
    cv_.notify_all();
  }
}

std::size_t cuda_evaluator::in_flight() const {
  std::lock_guard lk(mu_);
  return outstanding_ + done_.size();
}

std::vector<trial> cuda_evaluator::collect(bool wait) {
  std::unique_lock lk(mu_);
  if (wait) cv_.wait(lk, [&] { return !done_.empty() || outstanding_ == 0 || !fatal_error_.empty(); });
  if (!fatal_error_.empty() && done_.empty()) throw error(fatal_error_);
  std::vector<trial> out;
  out.swap(done_);
  return out;
}

void cuda_evaluator::finish(std::uint64_t, trial t) {
  // Caller holds mu_.
  if (t.ok() && t.time_ms < best_ms_) best_ms_ = t.time_ms;
  done_.push_back(std::move(t));
  if (outstanding_ > 0) --outstanding_;
  cv_.notify_all();
}

void cuda_evaluator::on_response(worker_proc& w, const std::string& line) {
  gpu::evaluate_response r;
  try {
    r = gpu::response_from_json(json::parse(line));
  } catch (const std::exception& e) {
    on_worker_lost(w, status::crashed, std::string("unreadable answer from the worker: ") + e.what());
    return;
  }
  std::lock_guard lk(mu_);
  auto it = running_.find(r.id);
  if (it == running_.end()) return;
  job jb = std::move(it->second);
  running_.erase(it);
  w.busy = false;
  trial& t = jb.t;
  t.st = r.st;
  t.error = r.error;
  // "argument #i" -> the argument's name.
  for (std::size_t i = 0; i < spec_->args.size(); ++i) {
    const std::string tag = "argument #" + std::to_string(i) + ":";
    if (auto pos = t.error.find(tag); pos != std::string::npos)
      t.error.replace(pos, tag.size(), "output '" + spec_->args[i].name + "':");
  }
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
  t.device = "cuda:" + std::to_string(w.device) + " " + w.info.name;
  t.cost.check = r.check_s;
  t.cost.benchmark = r.benchmark_s;
  t.cost.profile = r.profile_s;
  // Framework: the worker round trip (IPC, module load) beyond its stages. Waiting in the queue for a
  // free worker is not a cost of this variant and is recorded apart.
  const double on_worker = seconds_since(jb.dispatched);
  w.busy_s += on_worker;
  t.cost.framework = std::max(0.0, on_worker - r.check_s - r.benchmark_s - r.profile_s);
  t.metrics["kforge.queue_s"] =
      std::chrono::duration<double>(jb.dispatched - jb.submitted).count() - t.cost.compile;
  if (!r.notes.empty()) t.metrics.emplace("note.profiling_unavailable", 1.0), profiling_note_ = r.notes;
  if (jb.attempts > 0) {
    t.metrics["worker_losses"] = jb.attempts;
    if (!t.ok() && t.error.empty()) t.error = "after a lost worker (" + jb.first_loss + ")";
  }
  finish(r.id, std::move(t));
  if (r.fatal) {
    // The worker exits after a fatal answer: start a fresh one.
    stop_worker(w, false);
    ++w.restarts;
    if (!start_worker(w)) fatal_check_locked();
  }
}

void cuda_evaluator::on_worker_lost(worker_proc& w, status st, const std::string& why) {
  std::string tail;
  {
    std::ifstream in(w.log);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    tail = all.size() > 600 ? all.substr(all.size() - 600) : all;
  }
  int wst = 0;
  std::string how;
  if (w.pid > 0 && ::waitpid(w.pid, &wst, WNOHANG) == w.pid) {
    if (WIFSIGNALED(wst))
      how = " (killed by signal " + std::to_string(WTERMSIG(wst)) + ")";
    else if (WIFEXITED(wst))
      how = " (exit status " + std::to_string(WEXITSTATUS(wst)) + ")";
    w.pid = -1;
  }
  stop_worker(w, true);
  std::lock_guard lk(mu_);
  if (w.busy || running_.count(w.job)) {
    auto it = running_.find(w.job);
    if (it != running_.end() && st == status::crashed && it->second.attempts < retry_lost_) {
      // A worker that dies without a word may have died of something else than the variant (a lost
      // device, the OOM killer): the variant goes first in the queue for a fresh worker. A variant that
      // kills its worker again is crashed then. Faults the worker reports itself are not retried.
      job jb = std::move(it->second);
      running_.erase(it);
      ++jb.attempts;
      if (jb.first_loss.empty()) jb.first_loss = why + how;
      ready_.push_front(std::move(jb));
      it = running_.end();
    }
    if (it != running_.end()) {
      trial t = std::move(it->second.t);
      if (it->second.attempts > 0) t.metrics["worker_losses"] = it->second.attempts;
      running_.erase(it);
      t.st = st;
      t.error = why + how + (tail.empty() ? "" : "; worker log: " + tail);
      t.device = "cuda:" + std::to_string(w.device) + " " + w.info.name;
      finish(t.sequence, std::move(t));
    }
  }
  w.busy = false;
  ++w.restarts;
  if (!start_worker(w)) fatal_check_locked();
}

void cuda_evaluator::fatal_check_locked() {
  for (const auto& w : workers_)
    if (!w.broken) return;
  std::string why;
  for (const auto& w : workers_)
    why += "\n  GPU " + std::to_string(w.device) + ": " + w.broken_reason;
  fatal_error_ = "every GPU worker failed to restart:" + why;
  cv_.notify_all();
}

void cuda_evaluator::dispatch() {
  // Caller holds mu_. Give ready jobs to idle workers, most recently submitted last (FIFO).
  for (auto& w : workers_) {
    if (ready_.empty()) return;
    if (w.broken || w.busy || w.pid <= 0) continue;
    job jb = std::move(ready_.front());
    ready_.pop_front();
    jb.request.deep_metrics =
        profile_ ? deep_metrics_ : std::vector<std::string>{};  // empty unless deep_profile
    jb.request.deep_if_faster_than_ms = std::isfinite(best_ms_) ? best_ms_ : 1e300;  // JSON has no infinity
    const std::string line = gpu::to_json(jb.request).dump() + "\n";
    w.busy = true;
    w.job = jb.request.id;
    // Generous: the worker's own watchdog handles hung kernels; this catches a hung worker.
    w.deadline = clock_type::now() + std::chrono::seconds(static_cast<long>(driver_timeout_s_));
    jb.dispatched = clock_type::now();
    running_.emplace(jb.request.id, std::move(jb));
    std::size_t off = 0;
    while (off < line.size()) {
      const ssize_t n = ::write(w.to_worker, line.data() + off, line.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  }
}

void cuda_evaluator::loop() {
  while (!stop_) {
    // Finished compilations become GPU jobs (or compile_failed / invalid trials).
    while (true) {
      std::unique_lock lk(mu_);
      std::optional<std::pair<compile_pool::ticket, compile_result>> got;
      if (!compiled_.empty()) {
        got = std::move(compiled_.front());
        compiled_.pop_front();
      } else {
        lk.unlock();
        got = pool_->try_take_any();
        lk.lock();
      }
      if (!got) break;
      auto& [ticket, res] = *got;
      auto it = compiling_.find(ticket);
      if (it == compiling_.end()) {
        orphans_.emplace(ticket, std::move(res));
        continue;
      }
      job jb = std::move(it->second);
      compiling_.erase(it);
      jb.t.cost.compile = res.seconds;
      if (!res.ok) {
        jb.t.st = status::compile_failed;
        jb.t.error = res.log;
        finish(jb.t.sequence, std::move(jb.t));
        continue;
      }
      const auto& km = res.kernels.at(0);
      const auto& m = km.metrics;
      jb.t.metrics["static.registers"] = m.registers;
      jb.t.metrics["static.spill_stores_bytes"] = m.spill_stores_bytes;
      jb.t.metrics["static.spill_loads_bytes"] = m.spill_loads_bytes;
      jb.t.metrics["static.local_bytes"] = m.stack_frame_bytes;
      jb.t.metrics["static.shared_bytes"] = m.shared_static_bytes;
      jb.t.metrics["static.constant_bytes"] = m.constant_bytes;
      jb.t.metrics["static.compile_cache_hit"] = res.cache_hit ? 1 : 0;
      // Theoretical occupancy at the first timed shape's launch.
      const gpu::shape_job* timed = nullptr;
      for (const auto& s : jb.request.shapes)
        if (s.time) {
          timed = &s;
          break;
        }
      if (timed) {
        const int threads = static_cast<int>(timed->candidate.block[0] * timed->candidate.block[1] *
                                             timed->candidate.block[2]);
        const auto occ =
            theoretical_occupancy(m, threads, static_cast<int>(timed->candidate.shared_bytes), limits_);
        jb.t.metrics["static.occupancy"] = occ.fraction;
        jb.t.metrics["static.blocks_per_sm"] = occ.blocks_per_sm;
        if (static_filter_ && occ.blocks_per_sm == 0) {
          jb.t.st = status::invalid;
          jb.t.error =
              "cannot launch: " + std::to_string(threads) + " threads x " + std::to_string(m.registers) +
              " registers, " +
              std::to_string(m.shared_static_bytes + static_cast<int>(timed->candidate.shared_bytes)) +
              " bytes of shared memory exceed an SM (limited by " + occ.limited_by + ")";
          finish(jb.t.sequence, std::move(jb.t));
          continue;
        }
      }
      lk.unlock();
      jb.request.module_path = write_cubin(res);
      jb.request.function = km.lowered_name;
      jb.request.reference_module_path = reference_module_;
      jb.request.reference_function = reference_function_;
      jb.request.tolerances = spec_->tolerances;
      jb.request.timing = timing_;
      jb.request.watchdog = watchdog_;
      jb.request.metrics = profile_ ? metrics_ : std::vector<std::string>{};
      lk.lock();
      ready_.push_back(std::move(jb));
    }
    {
      std::lock_guard lk(mu_);
      dispatch();
    }
    // Worker answers and deaths.
    std::vector<pollfd> fds;
    for (auto& w : workers_)
      if (w.pid > 0 && w.from_worker >= 0) fds.push_back({w.from_worker, POLLIN, 0});
    if (fds.empty()) {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(20));
      continue;
    }
    ::poll(fds.data(), fds.size(), 5);
    for (auto& w : workers_) {
      if (w.pid <= 0 || w.from_worker < 0) continue;
      pollfd p{w.from_worker, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) {
        char buf[65536];
        const ssize_t n = ::read(w.from_worker, buf, sizeof buf);
        if (n <= 0) {
          on_worker_lost(w, status::crashed, "the worker died while running the variant");
          continue;
        }
        w.inbox.append(buf, static_cast<std::size_t>(n));
        std::size_t nl;
        while (w.pid > 0 && (nl = w.inbox.find('\n')) != std::string::npos) {
          const std::string line = w.inbox.substr(0, nl);
          w.inbox.erase(0, nl + 1);
          on_response(w, line);
        }
      } else if (w.busy && clock_type::now() > w.deadline) {
        on_worker_lost(w, status::timeout,
                       "the worker did not answer within " + std::to_string(driver_timeout_s_) + " s");
      }
    }
  }
}

nlohmann::json cuda_evaluator::describe() const {
  json ws = json::array();
  for (const auto& w : workers_) {
    auto j = gpu::to_json(w.info);
    j["restarts"] = w.restarts;
    j["busy_s"] = w.busy_s;
    j["broken"] = w.broken;
    if (w.broken) j["broken_reason"] = w.broken_reason;
    ws.push_back(j);
  }
  std::string device;
  for (const auto& w : workers_)
    if (!w.broken) {
      device = w.info.name;
      break;
    }
  return {{"type", "cuda"},
          {"device", device},
          {"kernel", spec_->name},
          {"workers", ws},
          {"arch", arch_},
          {"nvrtc", compiler::nvrtc_version()},
          {"cache_dir", cache_dir_.string()},
          {"profiling", profiling_note_.empty() ? std::string("on") : "off: " + profiling_note_},
          {"metrics", profile_ ? json(metrics_) : json::array()}};
}

void register_cuda_evaluator() {
  evaluator_registry().add({
      "cuda",
      "compiles variants of a kforge kernel description with NVRTC and checks, times and profiles them on "
      "GPUs "
      "(one worker process per GPU)",
      {
          optional_option("devices", option_type::list, "GPU indices to use (default: every visible GPU)"),
          int_option("workers_per_device", 1, "worker processes per GPU", 1, 64),
          int_option("compile_threads", 0, "NVRTC threads (0: one per core)", 0, 1024),
          string_option("arch", "sm_90", "the architecture compiled for"),
          optional_option("cache_dir", option_type::string,
                          "compile cache (default ~/.cache/kforge or $KFORGE_CACHE)"),
          optional_option("worker", option_type::string,
                          "the kforge-worker program (default: next to kforge)"),
          optional_option("worker_args", option_type::list,
                          "extra arguments of the worker (tests use --fake)"),
          int_option("warmup", 3, "untimed launches before timing", 0, 1000),
          int_option("min_repeats", 15, "timed launches at least", 3, 100000),
          int_option("max_repeats", 200, "timed launches at most", 3, 100000),
          real_option("target_rel_ci", 0.01, "stop when the 95% CI of the median is within this fraction", 0,
                      1),
          real_option("max_timing_seconds", 3.0, "time budget of the timing of one shape", 0.001, 3600),
          bool_option("flush_l2", true, "rewrite a buffer of twice the L2 before each timed launch"),
          string_option("timer", "events", "events (CUDA events) or cupti (activity records)",
                        {"events", "cupti"}),
          real_option("min_batch_us", 0.0, "launches shorter than this are timed in batches (0: never)", 0,
                      1e6),
          real_option("watchdog_min_ms", 2000.0, "a launch may always run this long", 1, 3.6e6),
          real_option("watchdog_factor", 100.0, "... or this many times the reference's time", 1, 1e6),
          real_option("request_timeout_s", 300.0, "a worker silent this long is killed", 1, 86400),
          int_option("retry_lost", 1,
                     "times a variant whose worker died unannounced is dispatched again before it is crashed",
                     0, 10),
          bool_option("profile", true, "collect CUPTI metrics (profiling runs apart from timing runs)"),
          optional_option("metrics", option_type::list, "CUPTI metric names (default: a 1-pass set)"),
          bool_option(
              "deep_profile", false,
              "also collect a deeper, multi-pass metric set for each new best (about 0.5 s each on an H200)"),
          optional_option("deep_metrics", option_type::list,
                          "the deeper set (default: SM and memory throughput, L2 hit rate, stalls)"),
          bool_option("static_filter", true,
                      "variants that cannot launch by their static resources are invalid without a GPU run"),
      },
      [](const options& o, const evaluator_context& ctx) -> evaluator {
        if (!ctx.prob.kernel_desc)
          o.where().fail(
              "the cuda evaluator needs a kforge kernel description: problem: {kernel: file.yaml}");
        return evaluator(std::make_unique<cuda_evaluator>(ctx.prob.kernel_desc, o, ctx));
      },
  });
}

}  // namespace kf
