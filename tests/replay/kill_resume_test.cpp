// kforge run --resume after SIGKILL at arbitrary points: a real `kforge run` process (replay with a
// real latency per evaluation) is killed repeatedly at random moments and resumed until it finishes;
// the stored trials must then be exactly those of an uninterrupted run: none lost, none repeated.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "kforge/store.hpp"
#include "support/test_support.hpp"

extern char** environ;

namespace kf {
namespace {

std::filesystem::path write_config(const std::filesystem::path& dir, const std::string& name,
                                   const std::string& strategy) {
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  return test::write_file(
      dir / (name + ".yaml"),
      "problem: {t1: " + (root / "T1.json").string() + "}\nstrategy: " + strategy +
          "\nevaluator: {type: replay, params: {file: " + (root / "cache.json").string() +
          ", latency_ms: 4}}\nbudget: {evaluations: 150}\nbatch_size: 3\nseed: 17\noutput: " +
          (dir / name).string() + "\n");
}

pid_t spawn_run(const std::filesystem::path& cfg, bool resume) {
  std::vector<std::string> args = {KFORGE_CLI, "run", "--quiet", cfg.string()};
  if (resume) args.insert(args.begin() + 2, "--resume");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, KFORGE_CLI, &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

std::vector<trial> stored(const std::filesystem::path& dir) {
  return run_store(dir).trials();
}

TEST(kill_resume, sigkill_at_random_points_loses_and_repeats_nothing) {
  test::temp_dir tmp;
  for (const std::string strategy : {"ga", "random"}) {
    // The reference: one uninterrupted run.
    const auto ref_cfg = write_config(tmp.path(), "ref-" + strategy, strategy);
    ASSERT_EQ(test::run_command(std::string(KFORGE_CLI) + " run --quiet " + ref_cfg.string()).status, 0);
    const auto ref = stored(tmp.path() / ("ref-" + strategy));
    ASSERT_EQ(ref.size(), 150u);

    const auto cfg = write_config(tmp.path(), "killed-" + strategy, strategy);
    std::mt19937 gen(1234);
    // Kill after a random delay; on a loaded machine start-up may take longer than the delay, so the
    // window grows whenever a round made no progress.
    double max_delay_ms = 250;
    int kills = 0;
    // --resume once a run is stored (a kill may come before the store is written; --resume then has
    // nothing to continue and is refused, so the next round starts the run afresh).
    const auto run_stored = [&] {
      try {
        return !run_store(tmp.path() / ("killed-" + strategy), store_access::read_only).meta("fingerprint").is_null();
      } catch (const std::exception&) {
        return false;
      }
    };
    std::size_t stored_before = 0;
    for (int round = 0; round < 200; ++round) {
      const pid_t pid = spawn_run(cfg, run_stored());
      std::uniform_int_distribution<int> delay_ms(20, static_cast<int>(max_delay_ms));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(gen)));
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ++kills;
        const auto now = std::filesystem::exists(tmp.path() / ("killed-" + strategy) / "run.sqlite")
                             ? stored(tmp.path() / ("killed-" + strategy)).size()
                             : 0;
        if (now == stored_before) max_delay_ms *= 1.5;
        stored_before = now;
        continue;
      }
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "kforge run failed in round " << round;
      break;
    }
    EXPECT_GE(kills, 3) << "the run finished too fast to be killed";
    const auto got = stored(tmp.path() / ("killed-" + strategy));
    ASSERT_EQ(got.size(), ref.size()) << strategy << " after " << kills << " kills";
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].sequence, i);
      EXPECT_EQ(got[i].cfg, ref[i].cfg) << "trial " << i;
      EXPECT_EQ(got[i].st, ref[i].st);
      EXPECT_DOUBLE_EQ(got[i].time_ms, ref[i].time_ms);
      EXPECT_DOUBLE_EQ(got[i].clock_s, ref[i].clock_s);
    }
    std::printf("%s: %d kills, %zu trials identical to the uninterrupted run\n", strategy.c_str(), kills,
                got.size());
  }
}

}  // namespace
}  // namespace kf
