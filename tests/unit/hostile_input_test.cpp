// Hostile input: what a config or a recording can make kforge load is bounded (YAML aliases, nesting,
// file sizes, gzip bombs); every refusal names the file (and line), exit status 2 from the CLI.
#include <gtest/gtest.h>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string stencil(const char* file) {
  return (test::source_dir() / "experiments/stencil2d-h200" / file).string();
}

// 342 bytes of nested YAML aliases that expand to 9^9 values.
std::string alias_bomb() {
  std::string text = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'i'; ++c) {
    text += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i)
      text += std::string(i ? "," : "") + "*" + prev;
    text += "]\n";
    prev = c;
  }
  return text;
}

TEST(hostile_input, yaml_alias_bomb_stops_at_load_naming_file_and_line) {
  test::temp_dir tmp;
  const auto bomb = test::write_file(tmp.path() / "bomb.yaml", alias_bomb());
  ASSERT_LT(alias_bomb().size(), 400u);
  try {
    load_document(bomb.string());
    FAIL() << "the alias bomb loaded";
  } catch (const config_error& e) {
    EXPECT_NE(e.file().find("bomb.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alias"), std::string::npos) << e.what();
  }
  const auto r = test::run_command(kforge + " run " + bomb.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("bomb.yaml:1"), std::string::npos) << r.output;
  // Deep nesting is refused too, not a stack overflow.
  const auto deep = test::write_file(tmp.path() / "deep.yaml",
                                     "a: " + std::string(100000, '[') + std::string(100000, ']') + "\n");
  EXPECT_EQ(test::run_command(kforge + " run " + deep.string()).status, 2);
}

TEST(hostile_input, gzip_bomb_and_oversized_files_are_refused_naming_the_file) {
  test::temp_dir tmp;
  const auto bomb = tmp.path() / "bomb.json.gz";
  // 32 MiB of zeros compress to 32 KiB; with a 4 MiB cap that is a bomb (the default cap is 1 GiB).
  ASSERT_EQ(test::run_command("head -c 33554432 /dev/zero | gzip -1 > " + bomb.string()).status, 0);
  auto r = test::run_command("KFORGE_MAX_FILE_MB=4 " + kforge + " space " + bomb.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("bomb.json.gz' decompresses to more than 4 MiB"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  // As the recording of a replay: the same, at the config key that named it.
  const auto cfg =
      test::write_file(tmp.path() / "e.yaml", "problem: {t1: " + stencil("T1.json") +
                                                  "}\nstrategy: random\nevaluator: {type: replay, "
                                                  "params: {file: " +
                                                  bomb.string() + "}}\n");
  r = test::run_command("KFORGE_MAX_FILE_MB=4 " + kforge + " run " + cfg.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("evaluator.params.file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bomb.json.gz"), std::string::npos) << r.output;
  // A plain file over the cap is refused before it is read.
  ASSERT_EQ(test::run_command("head -c 5242880 /dev/zero > " + (tmp.path() / "big.json").string()).status, 0);
  r = test::run_command("KFORGE_MAX_FILE_MB=4 " + kforge + " space " + (tmp.path() / "big.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("big.json' holds more than 4 MiB"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kf
