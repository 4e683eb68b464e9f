#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>

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
