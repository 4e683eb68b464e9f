// The compile cache: the key of a compile_request and one file per key on disk. No CUDA headers.
//
// Key: XXH3-128 (hex, 32 characters) over a length-prefixed encoding of a schema tag, the NVRTC
// version, the architecture, the source, each header (name and content, by name), the options sorted
// and the name expressions in request order. The request's `name` is not part of the key (it only
// labels diagnostics), so a cached failure's log names the file as it was first compiled.
// Entry file `<dir>/<key>.kfc`: magic, format version, the key, ok, log, CUBIN, kernels with their
// metrics, and an XXH3-64 checksum of all of that. Entries are written to a unique temporary file in
// the same directory and renamed into place, so a reader sees a whole entry or none; an entry that is
// unreadable, truncated, from another format version or fails its checksum is a miss.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/evaluators/compile.hpp"

namespace kf::cuda::detail {

/// Bumped whenever the metric rules or the entry layout change, so old entries become misses.
inline constexpr std::uint32_t compile_cache_format = 1;

std::string compile_cache_key(const compile_request& r, std::string_view nvrtc_version);

/// A compile request as JSON (the request file of an out-of-process compilation) and back; throws
/// kf::error on a malformed document.
nlohmann::json request_to_json(const compile_request& r);
compile_request request_from_json(const nlohmann::json& j);

/// Serialised entry (the result's cache_hit and seconds are not stored).
std::string encode_cache_entry(const compile_result& r);
/// nullopt when `bytes` is not a complete, intact entry for `key`.
std::optional<compile_result> decode_cache_entry(std::string_view bytes, const std::string& key);

class disk_cache {
 public:
  /// Creates `dir` when needed; throws kf::error when it cannot.
  explicit disk_cache(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path entry_path(const std::string& key) const { return dir_ / (key + ".kfc"); }
  /// The entry for `key`, or nullopt (absent or corrupt: a miss).
  std::optional<compile_result> load(const std::string& key) const;
  /// Best effort: returns false (and leaves no temporary file) when the entry cannot be written.
  bool store(const compile_result& r) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace kf::cuda::detail
