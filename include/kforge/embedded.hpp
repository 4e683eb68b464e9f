// Files compiled into the kforge binary, so that `kforge run` works on a fresh machine with no GPU
// and no ../shared: the default experiment and the space it replays (measured by this project on an
// H200, see experiments/README.md).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace kf::embedded {

/// The embedded files, by their path relative to the repository root (e.g. "configs/default.yaml").
std::vector<std::string_view> names();

/// The contents of an embedded file, or nullopt when `name` is not embedded.
std::optional<std::string_view> find(std::string_view name);

/// Paths of the form "embedded:<name>" in configs refer to embedded files.
inline constexpr std::string_view scheme = "embedded:";

}  // namespace kf::embedded
