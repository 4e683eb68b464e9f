// kforge error types.
//
// Contract: misuse (a bad config, an unknown option, an expression that does not parse) throws one of
// these; a failing *variant* never throws, it becomes a trial with a status (see trial.hpp).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kf {

/// Base of every error kforge reports to a user. what() is a complete, human-readable sentence.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration file or option is wrong: names the file, the key path and what was expected.
/// The CLI turns it into one line on stderr and exit status 2.
class config_error : public error {
 public:
  config_error(std::string file, std::string key_path, std::string reason);
  const std::string& file() const noexcept { return file_; }
  const std::string& key_path() const noexcept { return key_path_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string file_, key_path_, reason_;
};

/// An expression failed to parse. position() is a 0-based character offset into source().
class parse_error : public error {
 public:
  parse_error(std::string source, std::size_t position, std::string reason);
  const std::string& source() const noexcept { return source_; }
  std::size_t position() const noexcept { return position_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string source_;
  std::size_t position_;
  std::string reason_;
};

/// An expression parsed but could not be evaluated (division by zero, wrong types, unknown name).
/// position() points at the sub-expression that failed.
class eval_error : public error {
 public:
  eval_error(std::string source, std::size_t position, std::string reason);
  const std::string& source() const noexcept { return source_; }
  std::size_t position() const noexcept { return position_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string source_;
  std::size_t position_;
  std::string reason_;
};

/// Formats `source` with a caret under `position`, e.g. for parse and eval errors. A long source is
/// shown as a window of a few hundred characters around the position.
std::string caret_excerpt(const std::string& source, std::size_t position);

/// `text` as echoed in a message: whole when at most `max` characters, else its first `max` characters
/// (cut at a UTF-8 character boundary) and how long it was. Messages never echo user input unbounded.
std::string excerpt(std::string_view text, std::size_t max = 300);

}  // namespace kf
