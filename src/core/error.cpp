#include "kforge/error.hpp"

#include <algorithm>

namespace kf {

std::string caret_excerpt(const std::string& source, std::size_t position) {
  position = std::min(position, source.size());
  std::string out = "  " + source + "\n  " + std::string(position, ' ') + "^";
  return out;
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
