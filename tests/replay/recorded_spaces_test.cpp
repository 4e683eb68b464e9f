// Replay on the field's recorded spaces (../shared/data/tuning-spaces; skipped where absent) and on
// kforge's own recording (experiments/stencil2d-h200, always present).
#include <gtest/gtest.h>

#include <set>

#include "kforge/kforge.hpp"
#include "kforge/problem.hpp"
#include "kforge/evaluators/replay.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

// The valid configurations enumerated from a T1 file must be exactly the recorded ones.
void expect_t1_equals_recording(const std::string& t1, const std::string& recording, std::size_t expected) {
  const auto prob = load_t1(t1);
  const auto rec = read_recorded(recording);
  const auto& vs = prob.space.valid();
  EXPECT_EQ(vs.size(), expected) << t1;
  EXPECT_EQ(rec.records.size(), expected) << recording;
  const auto bound = bind_records(rec, prob.space);
  EXPECT_EQ(bound.unmatched, 0u) << bound.first_unmatched;
  EXPECT_EQ(bound.duplicates, 0u);
  std::set<config> recorded;
  for (const auto& [c, i] : bound.entries)
    recorded.insert(c);
  std::set<config> enumerated;
  for (std::size_t i = 0; i < vs.size(); ++i)
    enumerated.insert(vs.at(i));
  EXPECT_EQ(recorded, enumerated) << t1 << " vs " << recording;
}

TEST(recorded, own_h200_space_matches_its_t1) {
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  expect_t1_equals_recording((root / "T1.json").string(), (root / "cache.json").string(), 491);
}

TEST(recorded, benchmark_hub_t1_valid_sets_equal_the_recordings) {
  KF_REQUIRE_SHARED_DATA(data);
  const auto hub = data / "tuning-spaces/benchmark_hub";
  for (const char* gpu : {"A100", "A4000", "MI250X"}) {
    expect_t1_equals_recording((hub / "convolution/T1.json").string(),
                               (hub / "convolution" / (std::string(gpu) + ".json.gz")).string(), 4362);
    expect_t1_equals_recording((hub / "dedispersion/T1.json").string(),
                               (hub / "dedispersion" / (std::string(gpu) + ".json.gz")).string(), 11130);
  }
  expect_t1_equals_recording((hub / "convolution/T1.json").string(),
                             (hub / "convolution/A100_T4.json.gz").string(), 4362);
}

TEST(recorded, t4_and_kernel_tuner_recordings_agree) {
  KF_REQUIRE_SHARED_DATA(data);
  const auto hub = data / "tuning-spaces/benchmark_hub/convolution";
  const auto kt = read_recorded((hub / "A100.json.gz").string());
  const auto t4 = read_recorded((hub / "A100_T4.json.gz").string());
  EXPECT_EQ(kt.format, "kernel_tuner");
  EXPECT_EQ(t4.format, "t4");
  const auto space = recorded_space(kt);
  const auto bk = bind_records(kt, space), bt = bind_records(t4, space);
  ASSERT_EQ(bk.entries.size(), bt.entries.size());
  std::size_t ok = 0;
  for (std::size_t i = 0; i < bk.entries.size(); ++i) {
    ASSERT_EQ(bk.entries[i].first, bt.entries[i].first);
    const auto& a = kt.records[bk.entries[i].second].result;
    const auto& b = t4.records[bt.entries[i].second].result;
    EXPECT_EQ(a.st, b.st);
    if (a.ok()) {
      ++ok;
      EXPECT_DOUBLE_EQ(a.time_ms, b.time_ms);
      EXPECT_NEAR(a.cost.compile, b.cost.compile, 1e-9);
    }
  }
  EXPECT_EQ(ok, 4201u);  // 155 runtime and 6 compile failures recorded on the A100
}

TEST(recorded, failures_map_to_statuses) {
  KF_REQUIRE_SHARED_DATA(data);
  const auto kt = read_recorded((data / "tuning-spaces/benchmark_hub/convolution/A100.json.gz").string());
  std::size_t by_status[status_count] = {};
  for (const auto& r : kt.records)
    ++by_status[static_cast<std::size_t>(r.result.st)];
  EXPECT_EQ(by_status[static_cast<std::size_t>(status::ok)], 4201u);
  EXPECT_EQ(by_status[static_cast<std::size_t>(status::launch_failed)], 155u);
  EXPECT_EQ(by_status[static_cast<std::size_t>(status::compile_failed)], 6u);
  // A record's time is the median of its 32 runs, with their spread, and its costs in seconds.
  const auto it = std::find_if(kt.records.begin(), kt.records.end(), [](const recorded_record& rr) {
    return rr.params.at("block_size_x") == value(16) && rr.params.at("block_size_y") == value(1) &&
           rr.params.at("tile_size_x") == value(1) && rr.params.at("tile_size_y") == value(1) &&
           rr.params.at("read_only") == value(0) && rr.params.at("use_padding") == value(0) &&
           rr.params.at("use_shmem") == value(0);
  });
  ASSERT_NE(it, kt.records.end());
  const auto& r = it->result;  // cache key "16,1,1,1,0,0,0,1,15,15"
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.times_ms.size(), 32u);
  EXPECT_NEAR(r.time_ms, 3.87174391746521, 1e-12);  // numpy.median of its "times"
  EXPECT_GT(r.time_iqr_ms, 0.0);
  EXPECT_NEAR(r.cost.compile, 0.9185990339610726, 1e-12);
  EXPECT_NEAR(r.cost.total(), (918.5990339610726 + 126.3829180970788 + 105.24242906831205) / 1e3, 1e-12);
}

TEST(recorded, ktt_counters_become_metrics) {
  KF_REQUIRE_SHARED_DATA(data);
  const auto dir = data / "tuning-spaces/ktt-counters";
  for (auto [file, ok_count] :
       {std::pair{"pnpoly_2080Ti.json.gz", 3815u}, std::pair{"convolution_2080Ti.json.gz", 5280u}}) {
    const auto rec = read_recorded((dir / file).string());
    EXPECT_EQ(rec.format, "ktt");
    std::size_t ok = 0, with_counters = 0;
    for (const auto& r : rec.records) {
      ok += r.result.ok();
      with_counters += r.result.metrics.count("dram__throughput.avg.pct_of_peak_sustained_elapsed") > 0;
      if (r.result.ok()) {
        EXPECT_GT(r.result.metrics.size(), 30u);
      }
    }
    EXPECT_EQ(ok, ok_count) << file;
    EXPECT_EQ(with_counters, ok_count) << file;
    // The space is the recorded configurations; replaying one gives back its counters.
    const auto space = recorded_space(rec);
    EXPECT_EQ(space.valid().size(), rec.records.size());
    replay_evaluator ev(std::make_shared<const recorded_file>(rec), space);
    const auto t = ev.evaluate(std::vector<evaluation_request>{{0, space.valid().at(0), 0}});
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].device, "replay:NVIDIA GeForce RTX 2080 Ti");
  }
}

TEST(recorded, configurations_missing_from_the_recording_are_invalid) {
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  auto prob = load_t1((root / "T1.json").string());
  auto rec = read_recorded((root / "cache.json").string());
  const auto removed = rec.records.back().params;
  rec.records.pop_back();
  replay_evaluator ev(std::make_shared<const recorded_file>(rec), prob.space);
  EXPECT_EQ(ev.unrecorded_valid(), 1u);
  const auto c = prob.space.from_values(removed);
  const auto t = ev.evaluate(std::vector<evaluation_request>{{7, c, 0}});
  EXPECT_EQ(t[0].st, status::invalid);
  EXPECT_EQ(t[0].sequence, 7u);
  EXPECT_DOUBLE_EQ(t[0].cost.total(), 0.0);
}

}  // namespace
}  // namespace kf
