// kf::cuda::device_lock without a GPU: an exclusive holder keeps every other holder out until it lets go;
// shared holders coexist. Two lock objects on the same key behave like two worker processes (flock locks
// belong to the open file, not the process).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "evaluators/cuda/worker/device_lock.hpp"
#include "support/test_support.hpp"

namespace kf::cuda {
namespace {

using namespace std::chrono_literals;

class device_lock_test : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("KFORGE_LOCK_DIR", dir_.path().c_str(), 1); }
  void TearDown() override { ::unsetenv("KFORGE_LOCK_DIR"); }
  test::temp_dir dir_;
};

TEST_F(device_lock_test, exclusive_excludes_until_released) {
  device_lock a("0000:19:00.0"), b("0000:19:00.0");
  EXPECT_EQ(a.path().parent_path(), dir_.path());
  std::atomic<bool> got{false};
  std::thread t;
  {
    device_lock::guard hold(a, true);
    t = std::thread([&] {
      device_lock::guard shared(b, false);
      got = true;
    });
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(got.load()) << "a shared lock was granted while another holder had it exclusively";
  }
  t.join();
  EXPECT_TRUE(got.load());
}

TEST_F(device_lock_test, shared_holders_coexist_and_other_devices_are_independent) {
  device_lock a("0000:19:00.0"), b("0000:19:00.0"), other("0000:3b:00.0");
  device_lock::guard s1(a, false);
  std::atomic<bool> got_shared{false}, got_other{false};
  std::thread t1([&] {
    device_lock::guard s2(b, false);
    got_shared = true;
  });
  std::thread t2([&] {
    device_lock::guard x(other, true);
    got_other = true;
  });
  t1.join();  // would hang if shared holders excluded each other
  t2.join();
  EXPECT_TRUE(got_shared && got_other);
}

TEST_F(device_lock_test, an_unopenable_lock_is_a_no_op) {
  ::setenv("KFORGE_LOCK_DIR", "/nonexistent/kforge-locks", 1);
  device_lock a("x");
  device_lock::guard g(a, true);  // must not block or throw
  SUCCEED();
}

}  // namespace
}  // namespace kf::cuda
