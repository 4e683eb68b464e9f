// Every kforge program must start on a machine without an NVIDIA driver: none may need libcuda.so.1 at
// load time (src/cuda/driver_api.cpp loads it at run time, and only when a GPU is asked for).
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace {

TEST(binaries, none_needs_the_cuda_driver_at_load_time) {
  const std::string dir = std::filesystem::path(KFORGE_CLI).parent_path().string();
  for (const std::string& bin : {dir + "/kforge", dir + "/kforge-worker", std::string("/proc/self/exe")}) {
    const auto r = kf::test::run_command("readelf -d " + bin);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("NEEDED"), std::string::npos) << bin;
    EXPECT_EQ(r.output.find("libcuda"), std::string::npos) << bin << " links the CUDA driver:\n" << r.output;
  }
  // And the worker starts, and says so, where no driver is.
  const auto w = kf::test::run_command(dir + "/kforge-worker --fake < /dev/null");
  EXPECT_EQ(w.status, 0) << w.output;
}

}  // namespace
