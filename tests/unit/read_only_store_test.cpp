// report and export read a run without writing to its folder: a read-only folder (an archive, a
// colleague's run) is readable, including the committed trials a killed run left in its write-ahead
// log; a missing, empty, corrupt or foreign store is a message naming the file, never an internal error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

// Runs `command` as a user who cannot write `dir`: as root, as nobody (setpriv); otherwise after
// removing the write permission.
test::command_result as_reader(const std::filesystem::path& dir, const std::string& command) {
  test::run_command("chmod -R a-w " + dir.string());
  const std::string prefix = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  auto r = test::run_command(prefix + command);
  test::run_command("chmod -R u+w " + dir.string());
  return r;
}

std::filesystem::path write_config(const std::filesystem::path& dir, int evaluations, double latency_ms) {
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  return test::write_file(dir / "e.yaml",
                          "problem: {t1: " + (root / "T1.json").string() +
                              "}\nstrategy: random\nevaluator: {type: replay, params: {file: " +
                              (root / "cache.json").string() + ", latency_ms: " + std::to_string(latency_ms) +
                              "}}\nbudget: {evaluations: " + std::to_string(evaluations) +
                              "}\nseed: 5\noutput: " + (dir / "run").string() + "\n");
}

TEST(read_only_store, report_and_export_read_a_folder_they_cannot_write) {
  if (::geteuid() == 0 && test::run_command("command -v setpriv").status != 0)
    GTEST_SKIP() << "running as root without setpriv: no way to read as another user";
  test::temp_dir tmp;
  ASSERT_EQ(test::run_command("chmod 755 " + tmp.path().string()).status, 0);
  const auto cfg = write_config(tmp.path(), 20, 0);
  auto r = test::run_command(kforge + " run --quiet " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto run = tmp.path() / "run";
  r = as_reader(run, kforge + " report " + run.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("20 trials"), std::string::npos) << r.output;
  for (const char* fmt : {"jsonl", "csv", "t4", "kernel_tuner"}) {
    r = as_reader(run, kforge + " export " + run.string() + " --format " + fmt);
    EXPECT_EQ(r.status, 0) << fmt << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(run / "run.sqlite-wal")) << "a reader wrote to the run folder";
}

TEST(read_only_store, a_killed_runs_write_ahead_log_is_read_from_a_read_only_folder) {
  if (::geteuid() == 0 && test::run_command("command -v setpriv").status != 0)
    GTEST_SKIP() << "running as root without setpriv: no way to read as another user";
  test::temp_dir tmp;
  ASSERT_EQ(test::run_command("chmod 755 " + tmp.path().string()).status, 0);
  const auto cfg = write_config(tmp.path(), 100000, 2);
  const auto run = tmp.path() / "run";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl(KFORGE_CLI, KFORGE_CLI, "run", "--quiet", cfg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill it once some trials are committed (they sit in the write-ahead log).
  const auto stored = [&]() -> std::size_t {
    try {
      return run_store(run, store_access::read_only).trial_count();
    } catch (const std::exception&) {
      return 0;  // not created yet
    }
  };
  for (int i = 0; i < 400 && stored() < 10; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(std::filesystem::exists(run / "run.sqlite-wal"));
  // What a writer sees (on a copy, so that the original's log stays as the killed run left it).
  const auto copy = tmp.path() / "copy";
  std::filesystem::copy(run, copy);
  const auto committed = run_store(copy).trial_count();
  ASSERT_GT(committed, 0u);
  const auto r = as_reader(run, kforge + " report " + run.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(": " + std::to_string(committed) + " trials"), std::string::npos)
      << "expected " << committed << " trials:\n"
      << r.output;
}

TEST(read_only_store, missing_empty_corrupt_and_foreign_stores_name_the_file) {
  test::temp_dir tmp;
  struct bad {
    std::string name, words;
  };
  std::filesystem::create_directories(tmp.path() / "missing");
  test::write_file(tmp.path() / "empty/run.sqlite", "");
  test::write_file(tmp.path() / "garbage/run.sqlite", std::string(4096, 'x'));
  {
    std::filesystem::create_directories(tmp.path() / "foreign");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((tmp.path() / "foreign/run.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    run_store st(tmp.path() / "nospace");  // tables, but the run never got as far as its space
  }
  const std::vector<bad> cases = {{"missing", "run.sqlite is missing"},
                                  {"empty", "run.sqlite' is empty"},
                                  {"garbage", "run.sqlite' is not a readable run store"},
                                  {"foreign", "run.sqlite' is not a kforge run store"},
                                  {"nospace", "run.sqlite' describes no search space"}};
  for (const auto& c : cases)
    for (const std::string cmd : {" report ", " export "}) {
      const auto r = test::run_command(kforge + cmd + (tmp.path() / c.name).string());
      EXPECT_EQ(r.status, 1) << c.name << cmd << r.output;
      EXPECT_NE(r.output.find(c.words), std::string::npos) << c.name << cmd << r.output;
      EXPECT_EQ(r.output.find("internal error"), std::string::npos) << c.name << cmd << r.output;
    }
}

}  // namespace
}  // namespace kf
