// Shared by the transform tests (transform_golden_test.cpp, transform_compile_test.cpp): the input
// kernels under tests/unit/golden/transforms, and transforms made the way a kernel description's
// `transforms:` entry makes them.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/kforge.hpp"
#include "kforge/transform.hpp"
#include "support/test_support.hpp"

namespace kf::test {

inline std::filesystem::path golden_dir() {
  return source_dir() / "tests/unit/golden/transforms";
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// An input kernel of the transform tests, by file name.
inline std::string input(const std::string& name) {
  return read_text(golden_dir() / name);
}

/// The transform `type` at `site` with `params`, as the first entry of a kernel description's list.
inline transform make(const std::string& type, const std::string& site = "",
                      const nlohmann::json& params = nlohmann::json::object()) {
  register_builtins();
  plugin_spec ps{type, params, config_location{"kernel.yaml", "transforms[0]"}};
  return transform_registry().create(ps, transform_site{site});
}

inline transform_context context(std::string entry, std::vector<std::string> buffers,
                                 std::vector<std::string> read_only) {
  transform_context c;
  c.entry = std::move(entry);
  c.buffer_names = std::move(buffers);
  c.read_only = std::move(read_only);
  return c;
}

}  // namespace kf::test
