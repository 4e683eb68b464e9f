// kf::compile_pool: NVRTC compilations on a oneTBB task_arena, bounded by max_in_flight.
//
// Contract details beyond compile.hpp:
//  - "In flight" counts every ticket submitted and not yet taken (queued, compiling or finished);
//    submit() blocks while max_in_flight tickets are in flight, so a single-threaded caller must take
//    results before it submits more than max_in_flight requests.
//  - Tickets start at 1 and increase by one per submit(). A result belongs to its ticket whatever the
//    completion order; try_take_any() returns the finished result with the smallest ticket.
//  - An exception from compiler::compile becomes a result with ok == false and the message in its log.
//  - take() of a ticket that was never issued or was already taken throws kf::error.
//  - The pool's arena has `threads` worker slots and no slot for the submitting thread. While the pool
//    lives it holds two tbb::global_control objects: max_allowed_parallelism raised to at least
//    threads + 1 (oneTBB otherwise caps workers at cores - 1; a smaller limit set elsewhere in the
//    process still wins) and thread_stack_size of at least 64 MiB for NVRTC's front end (effective for
//    worker threads that oneTBB creates after the pool, i.e. when the pool is the first TBB user).
//  - The destructor skips compilations that have not started and waits for running ones.
//  - Out of process (compile.hpp): the request file is written next to the cache entries
//    (<cache>/requests/, a name unique to the process and ticket) and removed after the child; the child's
//    stdin, stdout and stderr are /dev/null (its result, log included, is the cache entry). The cache is
//    looked up before a child starts, so a hit costs no process.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>

#include "evaluators/cuda/nvrtc/compile_cache.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"

extern char** environ;

namespace kf {
namespace {

constexpr std::size_t worker_stack_bytes = std::size_t{64} << 20;

std::size_t parallelism_for(std::size_t threads) {
  return std::max<std::size_t>(threads + 1, static_cast<std::size_t>(tbb::info::default_concurrency()));
}

// Runs `command... --compile FILE --cache DIR` and waits for it; false when it could not be started.
bool run_child(const std::vector<std::string>& command, const std::filesystem::path& file,
               const std::filesystem::path& cache) {
  std::vector<std::string> words = command;
  words.insert(words.end(), {"--compile", file.string(), "--cache", cache.string()});
  std::vector<char*> argv;
  for (auto& w : words)
    argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

// The out-of-process compilation of one request (compile.hpp): the cached entry, else a child's, else
// the compilation in this process.
compile_result compile_in_child(const compiler& comp, const std::vector<std::string>& command,
                                const compile_request& r, std::uint64_t ticket) {
  const std::string key = comp.cache_key(r);  // hashed once: for header-heavy requests it is not cheap
  if (auto hit = comp.cached(key)) return std::move(*hit);
  const auto start = std::chrono::steady_clock::now();
  const auto dir = comp.cache_dir() / "requests";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto file = dir / ("request-" + std::to_string(::getpid()) + "-" + std::to_string(ticket) + ".json");
  bool ran = false;
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << cuda::detail::request_to_json(r).dump();
    if (out.good()) {
      out.close();
      ran = run_child(command, file, comp.cache_dir());
    }
  }
  std::filesystem::remove(file, ec);
  if (ran)
    if (auto got = comp.cached(key)) {
      got->cache_hit = false;
      got->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return std::move(*got);
    }
  return comp.compile(r);
}

}  // namespace

struct compile_pool::impl {
  impl(const compiler& c, std::size_t threads, std::size_t max, std::vector<std::string> process_command)
      : comp(c),
        process(c.cache_dir().empty() ? std::vector<std::string>{} : std::move(process_command)),
        max_in_flight(max),
        parallelism(tbb::global_control::max_allowed_parallelism, parallelism_for(threads)),
        stack(tbb::global_control::thread_stack_size, worker_stack_bytes),
        arena(static_cast<int>(threads), 0) {}

  const compiler& comp;
  const std::vector<std::string> process;  // empty: compile in this process
  const std::size_t max_in_flight;
  tbb::global_control parallelism;
  tbb::global_control stack;
  tbb::task_arena arena;

  mutable std::mutex mutex;
  std::condition_variable changed;  // a result finished, a ticket was taken, or a task ended
  ticket next = 1;
  std::size_t in_flight = 0;  // submitted and not taken
  std::size_t running = 0;    // enqueued tasks that have not ended
  bool stopping = false;
  std::map<ticket, std::optional<compile_result>> slots;  // in flight: pending (nullopt) or finished

  compile_result extract(std::map<ticket, std::optional<compile_result>>::iterator it) {
    compile_result r = std::move(*it->second);
    slots.erase(it);
    --in_flight;
    changed.notify_all();
    return r;
  }
};

compile_pool::compile_pool(const compiler& c, std::size_t threads, std::size_t max_in_flight,
                           std::vector<std::string> process) {
  if (threads == 0 || max_in_flight == 0)
    throw kf::error("compile_pool needs at least one thread and max_in_flight >= 1");
  if (threads > 4096)
    throw kf::error("compile_pool: " + std::to_string(threads) + " threads is not a sensible pool");
  impl_ = std::make_unique<impl>(c, threads, max_in_flight, std::move(process));
}

compile_pool::~compile_pool() {
  std::unique_lock lock(impl_->mutex);
  impl_->stopping = true;
  impl_->changed.wait(lock, [&] { return impl_->running == 0; });
}

compile_pool::ticket compile_pool::submit(compile_request r) {
  impl& s = *impl_;
  ticket t;
  {
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.in_flight < s.max_in_flight; });
    t = s.next++;
    s.slots.emplace(t, std::nullopt);
    ++s.in_flight;
    ++s.running;
  }
  s.arena.enqueue([&s, t, req = std::move(r)] {
    compile_result result;
    bool skip;
    {
      std::lock_guard lock(s.mutex);
      skip = s.stopping;
    }
    if (!skip) {
      try {
        result = s.process.empty() ? s.comp.compile(req) : compile_in_child(s.comp, s.process, req, t);
      } catch (const std::exception& e) {
        result = compile_result{};
        result.log = std::string("kforge: compile failed: ") + e.what() + "\n";
      }
    }
    std::lock_guard lock(s.mutex);  // the pool outlives this block: its destructor waits for running == 0
    if (auto it = s.slots.find(t); it != s.slots.end()) it->second = std::move(result);
    --s.running;
    s.changed.notify_all();
  });
  return t;
}

compile_result compile_pool::take(ticket t) {
  impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  for (;;) {  // looked up afresh after each wait: another thread may take `t` meanwhile
    auto it = s.slots.find(t);
    if (it == s.slots.end())
      throw kf::error("compile_pool::take: ticket " + std::to_string(t) +
                      " was never issued or was already taken");
    if (it->second) return s.extract(it);
    s.changed.wait(lock);
  }
}

std::optional<std::pair<compile_pool::ticket, compile_result>> compile_pool::try_take_any() {
  impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  for (auto it = s.slots.begin(); it != s.slots.end(); ++it)
    if (it->second) {
      const ticket t = it->first;
      return std::make_pair(t, s.extract(it));
    }
  return std::nullopt;
}

std::size_t compile_pool::in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->in_flight;
}

}  // namespace kf
