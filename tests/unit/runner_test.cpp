// kf::runner with a worker written in bash (no GPU, no Python): the pool's start-up contract.
#include <gtest/gtest.h>

#include <fstream>

#include "evaluators/runner/runner.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

// A worker that notes its start in a shared file, takes half a second to get ready (as a Python worker
// importing torch takes seconds), then greets and answers every job ok.
constexpr const char* slow_worker = R"(#!/usr/bin/env bash
echo start >> "$1"
sleep 0.5
while IFS= read -r line; do
  case "$line" in
    *'"hello"'*) echo hello >> "$1"; echo '{"name": "bash worker"}' ;;
    *'"exit"'*) exit 0 ;;
    *) id=$(echo "$line" | sed 's/.*"id": *\([0-9]*\).*/\1/'); echo "{\"id\": $id, \"status\": \"ok\"}" ;;
  esac
done
)";

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// The workers start at once: every process is running before the first greeting is awaited, so N
// workers cost one start-up, not N (a program evaluator's two Python workers spent ~8 s one after the
// other before a TritonBench-G search's 30 s budget could start).
TEST(runner, every_worker_starts_before_the_first_greeting) {
  test::temp_dir tmp;
  const auto script = test::write_file(tmp.path() / "worker.sh", slow_worker);
  const auto events = tmp.path() / "events.txt";
  runner_options o;
  o.command = {"bash", script.string(), events.string()};
  o.workers_per_device = 3;
  o.log_dir = tmp.path() / "logs";
  o.hello_timeout_s = 20;
  {
    runner r(o, {[](run_outcome) {}, [] {}});
    EXPECT_EQ(r.describe().size(), 3u);
    EXPECT_EQ(r.greeting().value("name", ""), "bash worker");
  }
  EXPECT_EQ(lines_of(events),
            (std::vector<std::string>{"start", "start", "start", "hello", "hello", "hello"}));
}

}  // namespace
}  // namespace kf
