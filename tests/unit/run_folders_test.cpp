// Run folders as a user meets them: --resume finds the killed run of a config without `output:`,
// auto-named folders never collide and carry the seed, one process per folder, resume compares
// canonical paths and says what differs, Ctrl-C ends a run cleanly with the command that resumes it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const std::string kforge = KFORGE_CLI;

std::string stencil(const char* file) {
  return (test::source_dir() / "experiments/stencil2d-h200" / file).string();
}

// A replay experiment slow enough to be caught mid-run (latency_ms per evaluation).
std::string experiment(const std::string& recording, int evaluations, double latency_ms,
                       const std::string& extra = "") {
  return "name: exp\nproblem: {t1: " + stencil("T1.json") +
         "}\nstrategy: random\nevaluator: {type: replay, params: {file: " + recording +
         ", latency_ms: " + std::to_string(latency_ms) +
         "}}\nbudget: {evaluations: " + std::to_string(evaluations) + "}\nseed: 7\n" + extra;
}

// `kforge ARGS...` started in `cwd`, stdout and stderr to `log`.
pid_t spawn(const std::filesystem::path& cwd, const std::vector<std::string>& args,
            const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(KFORGE_CLI)};
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(KFORGE_CLI, argv.data());
    ::_exit(127);
  }
  return pid;
}

std::size_t stored_trials(const std::filesystem::path& folder) {
  try {
    return run_store(folder, store_access::read_only).trial_count();
  } catch (const std::exception&) {
    return 0;
  }
}

// Waits until `folder()` names a run folder holding at least n trials.
template <class F>
std::filesystem::path wait_for_trials(F folder, std::size_t n) {
  for (int i = 0; i < 800; ++i) {
    const auto f = folder();
    if (!f.empty() && stored_trials(f) >= n) return f;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

std::vector<std::filesystem::path> runs_in(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_directory(root))
    for (const auto& e : std::filesystem::directory_iterator(root))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string in_dir(const std::filesystem::path& dir, const std::string& args) {
  return "cd " + dir.string() + " && " + kforge + " " + args;
}

TEST(run_folders, resume_without_output_continues_the_latest_unfinished_run) {
  test::temp_dir tmp;
  test::write_file(tmp.path() / "e.yaml", experiment(stencil("cache.json"), 150, 3));
  const pid_t pid = spawn(tmp.path(), {"run", "--quiet", "e.yaml"}, tmp.path() / "log");
  const auto folder = wait_for_trials(
      [&] {
        const auto r = runs_in(tmp.path() / "runs");
        return r.empty() ? std::filesystem::path() : r.front();
      },
      20);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_FALSE(folder.empty()) << read_text(tmp.path() / "log");
  const auto before = stored_trials(folder);
  auto r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resuming runs/" + folder.filename().string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("after 150 trials (" + std::to_string(before) + " taken from the stored run)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(runs_in(tmp.path() / "runs").size(), 1u);
  // Nothing left to resume: said plainly (exit 2), never a new run.
  r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no unfinished run of experiment 'exp' with seed 7"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("finished with 150 trials"), std::string::npos) << r.output;
  r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume --seed 8"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no unfinished run"), std::string::npos) << r.output;
  r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume --output elsewhere"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("nothing to resume in elsewhere"), std::string::npos) << r.output;
  EXPECT_EQ(runs_in(tmp.path() / "runs").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "elsewhere/run.sqlite"));
}

TEST(run_folders, auto_named_folders_never_collide_and_carry_the_seed) {
  test::temp_dir tmp;
  test::write_file(tmp.path() / "e.yaml", experiment(stencil("cache.json"), 3, 0));
  // A loop over seeds within one second, then the same seed four times at once.
  auto r = test::run_command("cd " + tmp.path().string() + " && for s in 1 2 3 4 5; do " + kforge +
                             " run --quiet e.yaml --seed $s || exit 1; done");
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command("cd " + tmp.path().string() + " && for i in 1 2 3 4; do " + kforge +
                        " run --quiet e.yaml --seed 9 > /dev/null & done; wait");
  const auto runs = runs_in(tmp.path() / "runs");
  ASSERT_EQ(runs.size(), 9u) << r.output;
  std::size_t seed9 = 0;
  for (const auto& f : runs) {
    EXPECT_EQ(stored_trials(f), 3u) << f;
    seed9 += f.filename().string().find("-s9") != std::string::npos;
  }
  EXPECT_EQ(seed9, 4u);
  for (int s = 1; s <= 5; ++s)
    EXPECT_NE(runs[static_cast<std::size_t>(s - 1)].filename().string().find("-s" + std::to_string(s)),
              std::string::npos);
}

TEST(run_folders, a_second_process_on_a_run_folder_is_refused_at_once) {
  test::temp_dir tmp;
  const auto run = tmp.path() / "run";
  test::write_file(tmp.path() / "e.yaml",
                   experiment(stencil("cache.json"), 150, 3, "output: " + run.string() + "\n"));
  const pid_t pid = spawn(tmp.path(), {"run", "--quiet", "e.yaml"}, tmp.path() / "log");
  ASSERT_FALSE(wait_for_trials([&] { return run; }, 5).empty()) << read_text(tmp.path() / "log");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("run folder " + run.string() + " in use by pid " + std::to_string(pid)),
            std::string::npos)
      << r.output;
  EXPECT_LT(seconds, 5.0);
  // kill -9 leaves no stale lock: the run resumes.
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --resume"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(stored_trials(run), 150u);
}

TEST(run_folders, resume_compares_canonical_paths_and_names_what_differs) {
  test::temp_dir tmp;
  const auto run = tmp.path() / "run";
  const std::string out = "output: " + run.string() + "\n";
  // The same recording, by a relative path from one config and an absolute path from another.
  std::filesystem::create_directories(tmp.path() / "a");
  const auto relative = std::filesystem::relative(stencil("cache.json"), tmp.path() / "a").string();
  test::write_file(tmp.path() / "a/e.yaml", experiment(relative, 20, 0, out));
  test::write_file(tmp.path() / "b.yaml", experiment(stencil("cache.json"), 20, 0, out));
  auto r = test::run_command(kforge + " run --quiet --evaluations 10 " + (tmp.path() / "a/e.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command(kforge + " run --quiet --resume " + (tmp.path() / "b.yaml").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("after 20 trials (10 taken from the stored run)"), std::string::npos) << r.output;
  // What differs is named, with both values.
  r = test::run_command(kforge + " run --quiet --resume --seed 2 " + (tmp.path() / "b.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("seed differs (stored 7, now 2)"), std::string::npos) << r.output;
  test::write_file(tmp.path() / "c.yaml", experiment(stencil("cache.json"), 20, 0, out + "batch_size: 4\n"));
  r = test::run_command(kforge + " run --quiet --resume " + (tmp.path() / "c.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("batch size differs (stored null, now 4)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("seed differs"), std::string::npos) << r.output;
  auto text = experiment(stencil("cache.json"), 20, 0, out);
  text.replace(text.find("strategy: random"), 16, "strategy: {type: ga, params: {population_size: 6}}");
  test::write_file(tmp.path() / "d.yaml", text);
  r = test::run_command(kforge + " run --quiet --resume " + (tmp.path() / "d.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("strategy differs (stored {\"params\": {}, \"type\": \"random\"}, now {\"params\": "
                          "{\"population_size\": 6}, \"type\": \"ga\"})"),
            std::string::npos)
      << r.output;
  test::write_file(
      tmp.path() / "s.yaml",
      experiment(stencil("cache.json"), 20, 0,
                 out + "start: [{block_size_x: 32, block_size_y: 8, tile_size_x: 1, tile_size_y: 1, "
                       "use_shared: 0}]\n"));
  r = test::run_command(kforge + " run --quiet --resume " + (tmp.path() / "s.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("start configurations differs (stored null, now [{\"block_size_x\": 32"),
            std::string::npos)
      << r.output;
}

TEST(run_folders, sigint_ends_the_run_cleanly_with_the_command_that_resumes_it) {
  test::temp_dir tmp;
  test::write_file(tmp.path() / "e.yaml", experiment(stencil("cache.json"), 120, 3));
  // The uninterrupted reference.
  auto r = test::run_command(in_dir(tmp.path(), "run --quiet e.yaml --output ref"));
  ASSERT_EQ(r.status, 0) << r.output;
  const pid_t pid = spawn(tmp.path(), {"run", "--quiet", "e.yaml"}, tmp.path() / "log");
  const auto folder = wait_for_trials(
      [&] {
        auto runs = runs_in(tmp.path() / "runs");
        return runs.empty() ? std::filesystem::path() : runs.front();
      },
      15);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto log = read_text(tmp.path() / "log");
  ASSERT_FALSE(folder.empty()) << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  const auto at = log.find("; resume with: ");
  ASSERT_NE(at, std::string::npos) << log;
  const auto n = stored_trials(folder);
  EXPECT_NE(log.find("interrupted after " + std::to_string(n) + " trials"), std::string::npos) << log;
  const auto command = log.substr(at + 15, log.find('\n', at) - at - 15);
  EXPECT_EQ(command, std::string(KFORGE_CLI) + " run --quiet e.yaml --resume --output runs/" +
                         folder.filename().string());
  r = test::run_command("cd " + tmp.path().string() + " && " + command);
  EXPECT_EQ(r.status, 0) << r.output;
  const auto ref = run_store(tmp.path() / "ref", store_access::read_only).trials();
  const auto got = run_store(folder, store_access::read_only).trials();
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i)
    EXPECT_EQ(got[i].cfg, ref[i].cfg) << "trial " << i;
}

}  // namespace
}  // namespace kf
