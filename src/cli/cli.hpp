// The kforge command line: one function per subcommand. Each returns the process exit status:
// 0 success, 1 a run-time failure, 2 a usage or configuration error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kf::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_score(const std::vector<std::string>& args);
int cmd_space(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_plugins(const std::vector<std::string>& args);
int cmd_runs(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_render(const std::vector<std::string>& args);

/// The value of a command-line option that takes a whole number: decimal digits only (no sign: "-1" is
/// refused, not wrapped around), from `min` to `max`; else a config_error naming the option (exit 2).
std::uint64_t whole_number(const std::string& option, const std::string& text, std::uint64_t min,
                           std::uint64_t max);

/// Draws a plot: writes `data` to a temporary JSON file and runs python/<script> DATA PNG with a Python
/// that has matplotlib: $KFORGE_PYTHON when set (only it), else <repo>/.venv/bin/python, else python3.
/// Throws kf::error saying how to install matplotlib when none has it, or when the script fails.
void draw_plot(const std::string& script, const nlohmann::json& data, const std::string& png);
/// Throws draw_plot's error now when no Python can draw (before a long computation whose plot is asked for).
void check_plotting();

/// How kforge was invoked (argv[0]), for commands that tell the user what to type next.
extern std::string program_name;

/// True when stdout is a terminal (progress lines are redrawn in place).
bool stdout_is_tty();

/// Formats a duration in seconds as "12.3 s", "4 min 05 s" or "1 h 02 min".
std::string format_duration(double seconds);

}  // namespace kf::cli
