// The folder layering of docs/architecture.md, checked on the sources: CUDA, NVRTC, CUPTI and NVML headers
// only inside evaluators/cuda; the concepts (include/kforge), the core (src/), strategies (search/) and
// operators (transforms/) never include an evaluator's internals; the runner knows no evaluator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace {

namespace fs = std::filesystem;

struct include_line {
  fs::path file;
  int line;
  std::string target;
};

std::vector<include_line> includes_under(const std::string& folder) {
  static const std::regex inc(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::vector<include_line> out;
  const fs::path root = fs::path(KFORGE_SOURCE_DIR) / folder;
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h")) continue;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string l; std::getline(in, l);) {
      ++n;
      std::smatch m;
      if (std::regex_search(l, m, inc))
        out.push_back({fs::relative(e.path(), KFORGE_SOURCE_DIR), n, m[1].str()});
    }
  }
  return out;
}

bool is_cuda_header(const std::string& h) {
  static const std::regex cuda(
      R"(^(cuda|cuda_runtime.*|cuda_occupancy|nvrtc|cupti.*|nvml|nvperf.*|cudaTypedefs)\.h$)");
  return std::regex_match(h, cuda);
}

std::string where(const include_line& l) {
  return l.file.string() + ":" + std::to_string(l.line) + " includes " + l.target;
}

}  // namespace

TEST(layering, cuda_headers_only_in_the_cuda_wing) {
  for (const char* folder :
       {"include", "src", "search", "transforms", "evaluators/replay", "evaluators/runner", "evaluators/program",
        "tests"})
    for (const auto& l : includes_under(folder))
      EXPECT_FALSE(is_cuda_header(l.target)) << where(l);
}

TEST(layering, the_core_includes_no_evaluator_internals) {
  for (const char* folder : {"include", "src", "search", "transforms"})
    for (const auto& l : includes_under(folder))
      EXPECT_NE(l.target.rfind("evaluators/", 0), 0u) << where(l);
}

TEST(layering, the_runner_knows_no_evaluator) {
  for (const auto& l : includes_under("evaluators/runner"))
    EXPECT_TRUE(l.target.rfind("evaluators/", 0) != 0 || l.target.rfind("evaluators/runner/", 0) == 0)
        << where(l);
}

TEST(layering, the_program_evaluator_uses_only_the_runner) {
  for (const auto& l : includes_under("evaluators/program"))
    EXPECT_TRUE(l.target.rfind("evaluators/", 0) != 0 || l.target.rfind("evaluators/runner/", 0) == 0)
        << where(l);
}

TEST(layering, the_replay_evaluator_needs_nothing_of_cuda) {
  for (const auto& l : includes_under("evaluators/replay")) {
    EXPECT_EQ(l.target.find("cuda"), std::string::npos) << where(l);
    EXPECT_NE(l.target.rfind("evaluators/", 0), 0u) << where(l);
  }
}

TEST(layering, the_driver_side_of_the_wing_does_not_include_the_worker) {
  for (const auto& l : includes_under("evaluators/cuda")) {
    const bool worker_side = l.file.string().find("/worker/") != std::string::npos;
    if (!worker_side) {
      EXPECT_EQ(l.target.find("/worker/"), std::string::npos) << where(l);
    }
  }
}

TEST(layering, mpi_only_in_the_mpi_backend) {
  // The coordinator and the serve loop speak through evaluators/mpi/channel.hpp; only the backend (linked
  // into the kforge program alone) sees MPI, so that everything else builds and is tested without it.
  for (const char* folder : {"include", "src", "search", "transforms", "evaluators", "tests"})
    for (const auto& l : includes_under(folder)) {
      const bool backend = l.file.string().rfind("evaluators/mpi/backend/", 0) == 0;
      if (!backend) {
        EXPECT_NE(l.target, "mpi.h") << where(l);
      }
    }
}
