// Recordings as Python writes them: NaN, Infinity and -Infinity are accepted where Python's json module
// accepts them; a Kernel Tuner record whose key disagrees with its values is an error naming the key.
#include <gtest/gtest.h>

#include <cmath>

#include "kforge/error.hpp"
#include "kforge/recorded.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

const trial& record(const recorded_file& f, const std::string& x) {
  for (const auto& r : f.records)
    if (r.params.at("x").str() == x) return r.result;
  throw std::runtime_error("no record x=" + x);
}

TEST(recorded_formats, kernel_tuner_cache_with_nan_and_infinity_loads) {
  test::temp_dir tmp;
  // What Python's json.dump writes for float('nan') and float('inf'); "NaN" inside a string stays a string.
  const auto path = test::write_file(tmp.path() / "cache.json", R"({
"device_name": "NaN GPU",
"kernel_name": "k",
"tune_params_keys": ["x"],
"tune_params": {"x": [1, 2, 3]},
"cache": {
"1": {"x": 1, "time": 1.5, "times": [1.0, 1.5, NaN, 2.0], "GFLOP/s": NaN, "compile_time": Infinity},
"2": {"x": 2, "time": NaN, "times": [NaN, NaN], "power": -Infinity},
"3": {"x": 3, "time": 0.5, "times": [0.5], "note": "NaN and Infinity"}}
})");
  const auto f = read_recorded(path.string());
  EXPECT_EQ(f.device_name, "NaN GPU");
  ASSERT_EQ(f.records.size(), 3u);
  const auto& one = record(f, "1");
  EXPECT_TRUE(one.ok());
  EXPECT_DOUBLE_EQ(one.time_ms, 1.5);  // the median of the finite runs
  EXPECT_EQ(one.times_ms.size(), 3u);
  EXPECT_TRUE(std::isnan(one.metrics.at("GFLOP/s")));
  EXPECT_EQ(one.cost.compile, 0.0);  // a non-finite cost is unknown
  const auto& two = record(f, "2");
  EXPECT_EQ(two.st, status::launch_failed);  // no finite run: a failure, not a crash
  EXPECT_NE(two.error.find("not a finite number"), std::string::npos) << two.error;
  EXPECT_EQ(two.metrics.at("power"), -INFINITY);
  EXPECT_TRUE(record(f, "3").ok());
}

TEST(recorded_formats, t4_with_nan_runtimes_loads) {
  test::temp_dir tmp;
  const auto path = test::write_file(tmp.path() / "t4.json", R"({"schema_version": "1.0.0",
 "metadata": {"timeunit": "milliseconds"},
 "results": [
  {"configuration": {"x": 1}, "times": {"runtimes": [1.0, NaN, 3.0]}, "invalidity": "correct", "correctness": 1},
  {"configuration": {"x": 2}, "times": {"runtimes": [NaN]}, "invalidity": "correct", "correctness": 1}]})");
  const auto f = read_recorded(path.string());
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_DOUBLE_EQ(record(f, "1").time_ms, 2.0);
  EXPECT_EQ(record(f, "2").st, status::launch_failed);
}

TEST(recorded_formats, a_key_that_disagrees_with_its_values_is_an_error_naming_it) {
  test::temp_dir tmp;
  const auto path = test::write_file(tmp.path() / "cache.json", R"({
"tune_params_keys": ["x", "y"],
"tune_params": {"x": [1, 2], "y": [1.5, 2.5]},
"cache": {
"1,1.5": {"x": 1, "y": 1.5, "time": 1.0},
"2,1.5": {"x": 2, "y": 2.5, "time": 1.0}}
})");
  try {
    read_recorded(path.string());
    FAIL() << "the mismatching record was accepted";
  } catch (const error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_NE(m.find("'2,1.5'"), std::string::npos) << m;
    EXPECT_NE(m.find("'2,2.5'"), std::string::npos) << m;
  }
}

// Every recording the tests use still loads (their keys agree with their values).
TEST(recorded_formats, shipped_and_shared_recordings_still_load) {
  EXPECT_GT(
      read_recorded((test::source_dir() / "experiments/stencil2d-h200/cache.json").string()).records.size(),
      0u);
  KF_REQUIRE_SHARED_DATA(data);
  for (const char* rel : {"tuning-spaces/benchmark_hub/convolution/A100.json.gz",
                          "tuning-spaces/benchmark_hub/dedispersion/A100.json.gz"})
    EXPECT_GT(read_recorded((data / rel).string()).records.size(), 0u) << rel;
}

}  // namespace
}  // namespace kf
