#include "kforge/error.hpp"

#include <algorithm>

namespace kf {

namespace {
// Moves `at` back to the start of a UTF-8 character.
std::size_t char_boundary(std::string_view s, std::size_t at) {
  while (at > 0 && at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80)
    --at;
  return at;
}
}  // namespace

std::string excerpt(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, char_boundary(text, max))) + "... (" + std::to_string(text.size()) +
         " characters in all)";
}

std::string caret_excerpt(const std::string& source, std::size_t position) {
  constexpr std::size_t before = 120, after = 120;
  position = std::min(position, source.size());
  const std::size_t first = char_boundary(source, position > before ? position - before : 0);
  const std::size_t last = char_boundary(source, std::min(source.size(), position + after));
  const std::string lead = first > 0 ? "..." : "";
  const std::string tail = last < source.size() ? "..." : "";
  return "  " + lead + source.substr(first, last - first) + tail + "\n  " +
         std::string(lead.size() + position - first, ' ') + "^";
}

config_error::config_error(std::string file, std::string key_path, std::string reason)
    : error((file.empty() ? std::string("<config>") : file) + ": " +
            (key_path.empty() ? "(top level)" : key_path) + ": " + reason),
      file_(std::move(file)),
      key_path_(std::move(key_path)),
      reason_(std::move(reason)) {}

parse_error::parse_error(std::string source, std::size_t position, std::string reason)
    : error("syntax error at column " + std::to_string(position + 1) + ": " + reason + "\n" +
            caret_excerpt(source, position)),
      source_(std::move(source)),
      position_(position),
      reason_(std::move(reason)) {}

eval_error::eval_error(std::string source, std::size_t position, std::string reason)
    : error("cannot evaluate at column " + std::to_string(position + 1) + ": " + reason + "\n" +
            caret_excerpt(source, position)),
      source_(std::move(source)),
      position_(position),
      reason_(std::move(reason)) {}

}  // namespace kf
