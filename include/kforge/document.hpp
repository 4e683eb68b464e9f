// kf::document: a YAML or JSON configuration file read into one JSON tree, remembering the line of
// every key so that errors can say where the offending value is.
//
// YAML scalars get the YAML 1.2 core-schema types (true/false, integers, floats, null, else strings);
// quoted scalars stay strings. Embedded files are read with the "embedded:" scheme.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "kforge/options.hpp"

namespace kf {

struct document {
  nlohmann::json root;
  std::string file;                ///< as given (path or "embedded:<name>")
  std::filesystem::path base_dir;  ///< folder that relative paths inside the file are resolved from
  std::shared_ptr<const std::map<std::string, int>> lines;  ///< key path -> 1-based line

  /// A location at `key_path` that reports the line when it fails.
  config_location at(const std::string& key_path) const;
};

/// What one document may make kforge allocate (docs/runs.md, "Limits"). Exceeding a limit is a
/// kf::config_error naming the file and the line.
struct document_limits {
  static constexpr std::size_t max_nodes = 250'000;  ///< YAML values once aliases are expanded
  static constexpr std::size_t max_depth = 128;      ///< nesting of YAML mappings and sequences
  static constexpr std::size_t max_key_path_bytes = std::size_t{64} << 20;  ///< recorded key paths
};

/// The most bytes read_file reads from one file, after decompression: 1 GiB, or $KFORGE_MAX_FILE_MB
/// mebibytes when set. A larger file (or a gzip bomb) is a kf::error naming the file.
std::size_t max_file_bytes();

/// Reads a .yaml/.yml/.json file (or "embedded:<name>"); JSON files may also be gzip-compressed
/// (.json.gz). Throws kf::config_error (file, line, reason) on a syntax error or a missing file.
document load_document(const std::string& path);

/// Parses text as YAML (JSON is YAML) with `file` used in error messages.
document parse_document(const std::string& text, const std::string& file,
                        const std::filesystem::path& base_dir);

/// Reads a whole file, transparently gunzipping .gz files; "embedded:<name>" reads an embedded file.
/// Throws kf::error naming the file when it cannot be read or is larger than max_file_bytes().
std::string read_file(const std::string& path);

/// Parses JSON as Python's json module reads it: strict JSON plus the bare tokens NaN, Infinity and
/// -Infinity (which Python writes for non-finite floats) as floats. Throws nlohmann's parse_error.
nlohmann::json parse_json(const std::string& text);

/// Resolves `path` relative to `base_dir` unless it is absolute or embedded.
std::string resolve_path(const std::string& path, const std::filesystem::path& base_dir);

}  // namespace kf
