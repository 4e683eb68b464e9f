#include "evaluators/runner/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "kforge/error.hpp"

extern char** environ;

namespace kf {

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;  // a dead worker: noticed when its output closes
    off += static_cast<std::size_t>(n);
  }
}

std::string tail_of(const std::filesystem::path& file, std::size_t n) {
  std::ifstream in(file);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > n ? all.substr(all.size() - n) : all;
}

// One worker slot: its process, pipes and the job it runs.
struct worker_slot {
  int device = 0;
  std::filesystem::path log;
  pid_t pid = -1;
  int to_worker = -1, from_worker = -1;
  std::string inbox;  // partial line read so far
  bool busy = false;
  std::uint64_t job = 0;
  clock_type::time_point deadline;
  json greeting;
  int restarts = 0;
  bool broken = false;
  std::string broken_reason;
  double busy_s = 0;
};

struct job_entry {
  std::uint64_t id = 0;
  json message;
  clock_type::time_point submitted, dispatched;
  int losses = 0;
  std::string first_loss;
};
}  // namespace

struct runner::impl {
  runner_options opt;
  callbacks cb;
  std::vector<worker_slot> slots;
  mutable std::mutex mu;
  std::deque<job_entry> ready;
  std::map<std::uint64_t, job_entry> running;
  std::size_t outstanding = 0;
  std::string failure;
  std::atomic<bool> stop{false};
  int wake[2] = {-1, -1};  // a byte written here interrupts the poll
  std::thread thread;

  // -- process management ----------------------------------------------------------------------
  bool start(worker_slot& w) { return spawn(w) && greet(w); }
  bool spawn(worker_slot& w);  // the process, without waiting for it
  void stop_process(worker_slot& w, bool kill_it);
  bool greet(worker_slot& w);
  void restart(worker_slot& w);
  void check_all_broken();

  // -- the loop ---------------------------------------------------------------------------------
  void loop();
  void dispatch();
  void read_from(worker_slot& w);
  void on_answer(worker_slot& w, const std::string& line);
  void on_lost(worker_slot& w, status st, const std::string& why);
  void notify() { (void)!::write(wake[1], "x", 1); }
};

bool runner::impl::spawn(worker_slot& w) {
  int in[2], out[2];
  if (::pipe(in) != 0) {
    w.broken = true, w.broken_reason = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  if (::pipe(out) != 0) {
    ::close(in[0]), ::close(in[1]);
    w.broken = true, w.broken_reason = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, w.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> args = opt.command;
  for (auto& a : args)
    for (std::size_t at; (at = a.find("{device}")) != std::string::npos;)
      a.replace(at, 8, std::to_string(w.device));
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // A process group of its own: Ctrl-C at the terminal reaches kforge, which ends the run cleanly and
  // stops its workers, not the workers themselves.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    w.broken = true;
    w.broken_reason = "cannot start " + args[0] + ": " + std::strerror(rc);
    return false;
  }
  w.pid = pid;
  w.to_worker = in[1];
  w.from_worker = out[0];
  w.inbox.clear();
  w.busy = false;
  return true;
}

bool runner::impl::greet(worker_slot& w) {
  write_all(w.to_worker, "{\"op\":\"hello\"}\n");
  std::string line;
  const auto t0 = clock_type::now();
  while (line.empty() && seconds_since(t0) < opt.hello_timeout_s) {
    pollfd p{w.from_worker, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
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
    if (line.empty())
      throw error("no greeting from the worker" +
                  (seconds_since(t0) >= opt.hello_timeout_s
                       ? " within " + std::to_string(opt.hello_timeout_s) + " s"
                       : std::string(" (it exited)")) +
                  "; its log " + w.log.string() + ": " + tail_of(w.log, 400));
    auto j = json::parse(line);
    if (j.contains("error")) throw error(j["error"].get<std::string>());
    w.greeting = std::move(j);
  } catch (const std::exception& e) {
    stop_process(w, true);
    w.broken = true;
    w.broken_reason = e.what();
    return false;
  }
  w.broken = false;
  w.broken_reason.clear();
  return true;
}

void runner::impl::stop_process(worker_slot& w, bool kill_it) {
  if (w.pid > 0) {
    if (kill_it)
      ::kill(w.pid, SIGKILL);
    else if (w.to_worker >= 0)
      write_all(w.to_worker, "{\"op\":\"exit\"}\n");
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

void runner::impl::restart(worker_slot& w) {
  // Caller holds mu.
  ++w.restarts;
  if (!start(w)) check_all_broken();
}

void runner::impl::check_all_broken() {
  // Caller holds mu.
  for (const auto& w : slots)
    if (!w.broken) return;
  std::string why;
  for (const auto& w : slots)
    why += "\n  GPU " + std::to_string(w.device) + ": " + w.broken_reason;
  failure = "every worker failed to restart:" + why;
  if (cb.on_failure) cb.on_failure();
}

void runner::impl::dispatch() {
  // Caller holds mu. Ready jobs go to idle workers in submission order.
  for (auto& w : slots) {
    if (ready.empty()) return;
    if (w.broken || w.busy || w.pid <= 0) continue;
    job_entry jb = std::move(ready.front());
    ready.pop_front();
    w.busy = true;
    w.job = jb.id;
    w.deadline =
        clock_type::now() + std::chrono::milliseconds(static_cast<long>(opt.request_timeout_s * 1e3));
    jb.dispatched = clock_type::now();
    const std::string line = jb.message.dump() + "\n";
    running.emplace(jb.id, std::move(jb));
    write_all(w.to_worker, line);
  }
}

void runner::impl::on_answer(worker_slot& w, const std::string& line) {
  // Caller holds mu.
  json answer;
  try {
    answer = json::parse(line);
    if (!answer.contains("id") || !answer["id"].is_number_unsigned()) throw error("no \"id\" in the answer");
  } catch (const std::exception& e) {
    on_lost(w, status::crashed, std::string("unreadable answer from the worker: ") + e.what());
    return;
  }
  const auto id = answer["id"].get<std::uint64_t>();
  auto it = running.find(id);
  if (it == running.end() || !w.busy || w.job != id) return;  // stale: a job already given up on
  job_entry jb = std::move(it->second);
  running.erase(it);
  w.busy = false;
  run_outcome o;
  o.id = id;
  o.losses = jb.losses;
  o.first_loss = jb.first_loss;
  o.worker = static_cast<std::size_t>(&w - slots.data());
  o.device = w.device;
  o.queue_s = std::chrono::duration<double>(jb.dispatched - jb.submitted).count();
  o.on_worker_s = seconds_since(jb.dispatched);
  w.busy_s += o.on_worker_s;
  const bool fatal = answer.value("fatal", false);
  o.answer = std::move(answer);
  if (outstanding > 0) --outstanding;
  if (cb.on_outcome) cb.on_outcome(std::move(o));
  if (fatal) {
    // The worker exits after a fatal answer: start a fresh one.
    stop_process(w, false);
    restart(w);
  }
}

void runner::impl::on_lost(worker_slot& w, status st, const std::string& why) {
  // Caller holds mu.
  std::string how;
  int wst = 0;
  if (w.pid > 0 && ::waitpid(w.pid, &wst, WNOHANG) == w.pid) {
    if (WIFSIGNALED(wst))
      how = " (killed by signal " + std::to_string(WTERMSIG(wst)) + ")";
    else if (WIFEXITED(wst))
      how = " (exit status " + std::to_string(WEXITSTATUS(wst)) + ")";
    w.pid = -1;
  }
  const std::string log_tail = tail_of(w.log, 600);
  const bool had_job = w.busy;
  stop_process(w, true);
  if (auto it = had_job ? running.find(w.job) : running.end(); it != running.end()) {
    job_entry jb = std::move(it->second);
    running.erase(it);
    ++jb.losses;
    if (jb.first_loss.empty()) jb.first_loss = why + how;
    if (st == status::crashed && jb.losses <= opt.retry_lost) {
      // A worker that dies without a word may have died of something else than the job (a lost device,
      // the OOM killer): the job goes first in the queue for a fresh worker. A job that kills its worker
      // again ends crashed. Faults the worker reports itself (fatal answers) are not retried.
      ready.push_front(std::move(jb));
    } else {
      run_outcome o;
      o.id = jb.id;
      o.lost = st;
      o.error = why + how + (log_tail.empty() ? "" : "; worker log: " + log_tail);
      o.losses = jb.losses;
      o.first_loss = jb.first_loss;
      o.worker = static_cast<std::size_t>(&w - slots.data());
      o.device = w.device;
      o.queue_s = std::chrono::duration<double>(jb.dispatched - jb.submitted).count();
      o.on_worker_s = seconds_since(jb.dispatched);
      if (outstanding > 0) --outstanding;
      if (cb.on_outcome) cb.on_outcome(std::move(o));
    }
  }
  w.busy = false;
  restart(w);
}

void runner::impl::read_from(worker_slot& w) {
  // Caller holds mu.
  char buf[65536];
  const ssize_t n = ::read(w.from_worker, buf, sizeof buf);
  if (n <= 0) {
    on_lost(w, status::crashed, "the worker died while running the job");
    return;
  }
  w.inbox.append(buf, static_cast<std::size_t>(n));
  for (std::size_t nl; w.pid > 0 && (nl = w.inbox.find('\n')) != std::string::npos;) {
    const std::string line = w.inbox.substr(0, nl);
    w.inbox.erase(0, nl + 1);
    on_answer(w, line);
  }
}

void runner::impl::loop() {
  while (!stop) {
    std::vector<pollfd> fds{{wake[0], POLLIN, 0}};
    {
      std::lock_guard lk(mu);
      dispatch();
      for (auto& w : slots)
        if (w.pid > 0 && w.from_worker >= 0) fds.push_back({w.from_worker, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 50);
    if (fds[0].revents & POLLIN) {
      char drain[256];
      (void)!::read(wake[0], drain, sizeof drain);
    }
    std::lock_guard lk(mu);
    for (auto& w : slots) {
      if (w.pid <= 0 || w.from_worker < 0) continue;
      pollfd p{w.from_worker, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0)
        read_from(w);
      else if (w.busy && clock_type::now() > w.deadline)
        on_lost(w, status::timeout,
                "the worker did not answer within " + std::to_string(opt.request_timeout_s) + " s");
    }
  }
}

runner::runner(runner_options o, callbacks cb) : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  if (o.command.empty()) throw error("runner: no worker command");
  if (o.devices.empty()) throw error("runner: no devices");
  // A worker that dies closes its pipe: writing to it must fail with EPIPE, not kill kforge.
  ::signal(SIGPIPE, SIG_IGN);
  m.opt = std::move(o);
  m.cb = std::move(cb);
  if (::pipe(m.wake) != 0) throw error(std::string("runner: pipe: ") + std::strerror(errno));
  ::fcntl(m.wake[0], F_SETFL, O_NONBLOCK);
  ::fcntl(m.wake[1], F_SETFL, O_NONBLOCK);
  if (!m.opt.log_dir.empty()) std::filesystem::create_directories(m.opt.log_dir);
  for (int d : m.opt.devices)
    for (int slot = 0; slot < m.opt.workers_per_device; ++slot) {
      worker_slot w;
      w.device = d;
      w.log = m.opt.log_dir / ("worker-gpu" + std::to_string(d) + "-" + std::to_string(slot) + ".log");
      m.slots.push_back(std::move(w));
    }
  // Every process first, then the greetings: the workers' start-up (a Python worker imports torch and
  // Triton, seconds) runs in parallel, not one after the other.
  for (auto& w : m.slots)
    m.spawn(w);
  std::string failures;
  std::size_t started = 0;
  for (auto& w : m.slots) {
    if (!w.broken && m.greet(w))
      ++started;
    else
      failures += "\n  GPU " + std::to_string(w.device) + ": " + w.broken_reason;
  }
  if (started == 0) {
    ::close(m.wake[0]), ::close(m.wake[1]);
    throw error("no worker could start:" + failures);
  }
  m.thread = std::thread([&m] { m.loop(); });
}

runner::~runner() {
  auto& m = *impl_;
  m.stop = true;
  m.notify();
  if (m.thread.joinable()) m.thread.join();
  for (auto& w : m.slots)
    m.stop_process(w, w.busy);
  ::close(m.wake[0]);
  ::close(m.wake[1]);
}

void runner::submit(std::uint64_t id, nlohmann::json message) {
  auto& m = *impl_;
  {
    std::lock_guard lk(m.mu);
    if (!m.failure.empty()) throw error(m.failure);
    message["id"] = id;
    job_entry jb;
    jb.id = id;
    jb.message = std::move(message);
    jb.submitted = clock_type::now();
    m.ready.push_back(std::move(jb));
    ++m.outstanding;
  }
  m.notify();
}

std::size_t runner::in_flight() const {
  std::lock_guard lk(impl_->mu);
  return impl_->outstanding;
}

std::size_t runner::size() const {
  return impl_->slots.size();
}

nlohmann::json runner::greeting() const {
  std::lock_guard lk(impl_->mu);
  for (const auto& w : impl_->slots)
    if (!w.broken) return w.greeting;
  return nullptr;
}

std::string runner::failure() const {
  std::lock_guard lk(impl_->mu);
  return impl_->failure;
}

nlohmann::json runner::describe() const {
  std::lock_guard lk(impl_->mu);
  json ws = json::array();
  for (const auto& w : impl_->slots) {
    json j = w.greeting.is_object() ? w.greeting : json::object();
    j["device"] = w.device;
    j["restarts"] = w.restarts;
    j["busy_s"] = w.busy_s;
    j["broken"] = w.broken;
    if (w.broken) j["broken_reason"] = w.broken_reason;
    ws.push_back(std::move(j));
  }
  return ws;
}

int count_worker_devices(const std::string& shell_command) {
  const std::string cmd = shell_command + " 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return 0;
  char buf[64] = {};
  const bool read = std::fgets(buf, sizeof buf, f) != nullptr;
  ::pclose(f);
  return read ? std::atoi(buf) : 0;
}

}  // namespace kf
