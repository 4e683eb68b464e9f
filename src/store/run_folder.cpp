#include "kforge/run_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "kforge/document.hpp"
#include "kforge/embedded.hpp"
#include "kforge/error.hpp"
#include "kforge/options.hpp"
#include "kforge/store.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

std::string utc_stamp() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return stamp;
}

std::optional<long> read_pid(int fd) {
  char buf[32] = {};
  const auto n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return std::nullopt;
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  return pid > 0 ? std::optional<long>(pid) : std::nullopt;
}

std::string folder_time(const std::filesystem::path& folder) {
  std::error_code ec;
  const auto t = std::filesystem::last_write_time(folder, ec);
  if (ec) return "";
  const auto sys = std::filesystem::file_time_type::clock::to_sys(t);
  const auto tt = std::chrono::system_clock::to_time_t(sys);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The string options of a fingerprint's evaluator that name existing files, as canonical paths.
void canonicalize_paths(json& params, const std::filesystem::path& base_dir) {
  if (!params.is_object()) return;
  for (auto& [key, v] : params.items()) {
    if (!v.is_string()) continue;
    const auto& s = v.get_ref<const std::string&>();
    if (s.empty() || s.rfind(embedded::scheme, 0) == 0) continue;
    const std::filesystem::path p = resolve_path(s, base_dir);
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) continue;
    const auto c = std::filesystem::weakly_canonical(p, ec);
    if (!ec) v = c.string();
  }
}
}  // namespace

std::filesystem::path create_run_folder(const std::filesystem::path& root, const std::string& name,
                                        std::uint64_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw error("cannot create the runs folder '" + root.string() + "': " + ec.message());
  const std::string base = name + "-" + utc_stamp() + "-s" + std::to_string(seed);
  for (int n = 1; n < 10000; ++n) {
    const auto folder = root / (n == 1 ? base : base + "-" + std::to_string(n));
    // mkdir is atomic: exactly one of several racing processes creates a given folder.
    if (std::filesystem::create_directory(folder, ec)) return folder;
    if (ec) throw error("cannot create the run folder '" + folder.string() + "': " + ec.message());
  }
  throw error("cannot create a run folder under '" + root.string() + "': " + base + "-2 ... -9999 are taken");
}

run_lock::run_lock(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw error("cannot create run folder '" + folder.string() + "': " + ec.message());
  const auto file = folder / "lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw error("cannot open '" + file.string() + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const auto pid = read_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw error("run folder " + folder.string() + " in use by pid " + (pid ? std::to_string(*pid) : "?") +
                  " (one process per run folder; wait for it, or stop it)");
    throw error("cannot lock '" + file.string() + "': " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    throw error("cannot write '" + file.string() + "': " + std::strerror(errno));
}

run_lock::~run_lock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
}

std::optional<long> run_lock::holder(const std::filesystem::path& folder) {
  const int fd = ::open((folder / "lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<long> pid;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) pid = read_pid(fd).value_or(0);
  ::close(fd);
  return pid;
}

json canonical_fingerprint(json fingerprint, const std::filesystem::path& base_dir) {
  if (fingerprint.is_object() && fingerprint.contains("evaluator") && fingerprint["evaluator"].is_object() &&
      fingerprint["evaluator"].contains("params"))
    canonicalize_paths(fingerprint["evaluator"]["params"], base_dir);
  return fingerprint;
}

std::string fingerprint_difference(const json& stored, const json& now) {
  if (stored == now) return "";
  static const std::pair<const char*, const char*> parts[] = {{"problem", "problem"},
                                                              {"strategy", "strategy"},
                                                              {"evaluator", "evaluator"},
                                                              {"seed", "seed"},
                                                              {"batch_size", "batch size"},
                                                              {"schedule", "schedule"},
                                                              {"start", "start configurations"},
                                                              {"transfer", "transfer records"}};
  std::string out;
  const auto part = [](const json& fp, const char* key) {
    return fp.is_object() && fp.contains(key) ? fp[key] : json();
  };
  for (const auto& [key, label] : parts) {
    const json a = part(stored, key), b = part(now, key);
    if (a == b) continue;
    out += std::string(out.empty() ? "" : "; ") + label + " differs (stored " + describe_json(a, 200) +
           ", now " + describe_json(b, 200) + ")";
  }
  return out.empty() ? "the run's fingerprint differs (" + describe_json(stored, 200) + " vs " +
                           describe_json(now, 200) + ")"
                     : out;
}

std::vector<found_run> find_runs(const std::filesystem::path& root, const json& fingerprint) {
  std::vector<found_run> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec) || !std::filesystem::exists(entry.path() / "run.sqlite", ec)) continue;
    try {
      const run_store store(entry.path(), store_access::read_only);
      const auto stored = store.meta("fingerprint");
      if (stored.is_null()) continue;
      const auto file = store.meta("config_file");
      const std::filesystem::path base =
          file.is_string() && file.get<std::string>().rfind(embedded::scheme, 0) != 0
              ? std::filesystem::absolute(file.get<std::string>()).parent_path()
              : std::filesystem::path();
      if (!fingerprint_difference(canonical_fingerprint(stored, base), fingerprint).empty()) continue;
      found_run r;
      r.folder = entry.path();
      r.finished = store.meta("finished").is_object();
      const auto created = store.meta("created_at");
      r.created_at = created.is_string() ? created.get<std::string>() : folder_time(entry.path());
      r.trials = store.trial_count();
      out.push_back(std::move(r));
    } catch (const error&) {
      continue;  // not a readable run store: not a run to resume
    }
  }
  std::sort(out.begin(), out.end(), [](const found_run& a, const found_run& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.folder > b.folder;
  });
  return out;
}

}  // namespace kf
