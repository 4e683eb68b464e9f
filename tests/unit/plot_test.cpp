// Plots: `kforge report RUN... --plot FILE.png` (convergence of several runs on one pair of axes) and
// `kforge score ... --plot FILE.png` (P(t) curves), drawn by python/ scripts with matplotlib from the
// repository's .venv; without matplotlib, a clear error saying how to install it.
#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string stencil(const char* file) {
  return (test::source_dir() / "experiments/stencil2d-h200" / file).string();
}

bool is_png(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic + 1, 3) == "PNG" && std::filesystem::file_size(p) > 5000;
}

TEST(plots, report_and_score_draw_pngs) {
  std::string why;
  const auto python = test::python_with("matplotlib", why);
  if (!python) GTEST_SKIP() << why;
  const std::string env = "KFORGE_PYTHON=" + *python + " ";
  test::temp_dir tmp;
  for (const char* strategy : {"random", "ga"}) {
    const auto cfg = test::write_file(
        tmp.path() / (std::string(strategy) + ".yaml"),
        "problem: {t1: " + stencil("T1.json") + "}\nstrategy: " + strategy +
            "\nevaluator: {type: replay, params: {file: " + stencil("cache.json") +
            "}}\nbudget: {evaluations: 30}\noutput: " + (tmp.path() / strategy).string() + "\n");
    ASSERT_EQ(test::run_command(kforge + " run --quiet " + cfg.string()).status, 0);
  }
  auto r = test::run_command(env + kforge + " report " + (tmp.path() / "random").string() + " " +
                             (tmp.path() / "ga").string() + " --plot " + (tmp.path() / "conv.png").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(is_png(tmp.path() / "conv.png")) << r.output;
  const auto score =
      test::write_file(tmp.path() / "score.yaml",
                       "spaces:\n  - {name: stencil, recording: " + stencil("cache.json") +
                           ", t1: " + stencil("T1.json") + "}\nstrategies: [random, ga]\nseeds: 2\n");
  r = test::run_command(env + kforge + " score " + score.string() + " --plot " +
                        (tmp.path() / "pt.png").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(is_png(tmp.path() / "pt.png")) << r.output;
}

TEST(plots, without_matplotlib_the_error_says_how_to_install_it) {
  test::temp_dir tmp;
  const auto cfg =
      test::write_file(tmp.path() / "e.yaml", "problem: {t1: " + stencil("T1.json") +
                                                  "}\nstrategy: random\nevaluator: {type: replay, "
                                                  "params: {file: " +
                                                  stencil("cache.json") +
                                                  "}}\nbudget: {evaluations: "
                                                  "3}\noutput: " +
                                                  (tmp.path() / "run").string() + "\n");
  ASSERT_EQ(test::run_command(kforge + " run --quiet " + cfg.string()).status, 0);
  // A Python that cannot import matplotlib.
  const auto fake = test::write_file(tmp.path() / "python", "#!/bin/sh\nexit 1\n");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto r =
      test::run_command("KFORGE_PYTHON=" + fake.string() + " " + kforge + " report " +
                        (tmp.path() / "run").string() + " --plot " + (tmp.path() / "x.png").string());
  EXPECT_EQ(r.status, 1) << r.output;
  for (const char* words : {"plotting needs the Python package matplotlib", "scripts/install-deps",
                            "python/requirements.txt", "KFORGE_PYTHON"})
    EXPECT_NE(r.output.find(words), std::string::npos) << words << " in\n" << r.output;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "x.png"));
}

}  // namespace
}  // namespace kf
