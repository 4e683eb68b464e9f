#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "cli/cli.hpp"

namespace kf::cli {

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
