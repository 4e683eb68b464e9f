// `kforge score`'s selection options: --space keeps the named spaces, --seed-base moves the seeds (the
// same cell with seed_base in the config gives the same score), and a --space that names nothing is a
// usage error (exit 2).
#include <gtest/gtest.h>

#include <regex>

#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string stencil(const char* file) {
  return (test::source_dir() / "experiments/stencil2d-h200" / file).string();
}

std::string score_config(const test::temp_dir& tmp, const std::string& name, int seed_base) {
  const std::string space = ", recording: " + stencil("cache.json") + ", t1: " + stencil("T1.json") + "}";
  return test::write_file(tmp.path() / name,
                          "spaces:\n  - {name: a" + space + "\n  - {name: b" + space +
                              "\nstrategies: [ga]\nseeds: 3\nseed_base: " + std::to_string(seed_base) + "\n")
      .string();
}

// The P of the first printed cell.
std::string first_score(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("P = +(-?[0-9.]+)")) ? m[1].str() : "";
}

TEST(score_cli, space_and_seed_base_select_the_cells) {
  test::temp_dir tmp;
  const auto from0 = score_config(tmp, "s0.yaml", 0);
  const auto from7 = score_config(tmp, "s7.yaml", 7);
  auto r = test::run_command(kforge + " score " + from0 + " --space b");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 spaces x 1 strategies x 3 seeds"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  b "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\n  a "), std::string::npos) << r.output;
  const auto moved = test::run_command(kforge + " score " + from0 + " --space a --seed-base 7");
  const auto config = test::run_command(kforge + " score " + from7 + " --space a");
  const auto base = test::run_command(kforge + " score " + from0 + " --space a");
  ASSERT_EQ(moved.status, 0) << moved.output;
  ASSERT_FALSE(first_score(moved.output).empty()) << moved.output;
  EXPECT_EQ(first_score(moved.output), first_score(config.output));
  EXPECT_NE(first_score(moved.output), first_score(base.output));
  r = test::run_command(kforge + " score " + from0 + " --space nope");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--space"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kf
