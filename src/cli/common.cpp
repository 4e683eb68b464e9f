#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/cli.hpp"
#include "kforge/error.hpp"

namespace kf::cli {

std::string program_name = "kforge";

std::uint64_t whole_number(const std::string& option, const std::string& text, std::uint64_t min,
                           std::uint64_t max) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || ec != std::errc() || end != text.data() + text.size() || v < min || v > max)
    throw config_error("command line", option,
                       "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
                           ", got '" + excerpt(text, 40) + "'");
  return v;
}

namespace {
// Runs argv (no shell); its exit status, or -1 when it could not run.
int run_program(const std::vector<std::string>& argv, bool quiet) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (quiet) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The Python that draws kforge's plots.
std::string plotting_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KFORGE_PYTHON"); env && *env) {
    candidates.emplace_back(env);
  } else {
    const auto venv = std::filesystem::path(KFORGE_SOURCE_DIR) / ".venv/bin/python";
    if (std::filesystem::exists(venv)) candidates.push_back(venv.string());
    candidates.emplace_back("python3");
  }
  for (const auto& py : candidates)
    if (run_program({py, "-c", "import matplotlib"}, true) == 0) return py;
  std::string tried;
  for (const auto& py : candidates)
    tried += (tried.empty() ? "" : ", ") + py;
  throw error("plotting needs the Python package matplotlib, which " + tried +
              " cannot import: run scripts/install-deps (it installs python/requirements.txt into " +
              std::string(KFORGE_SOURCE_DIR) + "/.venv), or `python3 -m pip install -r " + KFORGE_SOURCE_DIR +
              "/python/requirements.txt`, or set KFORGE_PYTHON to a Python that has it");
}
}  // namespace

void check_plotting() {
  (void)plotting_python();
}

void draw_plot(const std::string& script, const nlohmann::json& data, const std::string& png) {
  const auto python = plotting_python();
  std::string tmp = (std::filesystem::temp_directory_path() / "kforge-plot-XXXXXX.json").string();
  const int fd = ::mkstemps(tmp.data(), 5);
  if (fd < 0)
    throw error("cannot create a temporary file for the plot data: " + std::string(std::strerror(errno)));
  const auto text = data.dump();
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  const auto path = (std::filesystem::path(KFORGE_SOURCE_DIR) / "python" / script).string();
  const int rc = written ? run_program({python, path, tmp, png}, false) : -1;
  std::filesystem::remove(tmp);
  if (rc != 0)
    throw error("cannot draw '" + png + "': " + python + " " + path + " failed" +
                (rc > 0 ? " (exit status " + std::to_string(rc) + ")" : ""));
}

bool stdout_is_tty() {
  return ::isatty(STDOUT_FILENO) == 1;
}

std::string format_duration(double s) {
  char buf[64];
  if (!std::isfinite(s)) return "?";
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%d h %02d min", static_cast<int>(s / 3600),
                  static_cast<int>(s / 60) % 60);
  return buf;
}

}  // namespace kf::cli
