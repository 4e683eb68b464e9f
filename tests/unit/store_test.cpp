#include <gtest/gtest.h>

#include <sstream>

#include "kforge/error.hpp"
#include "kforge/recorded.hpp"
#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

search_space two_param_space() {
  std::vector<param> ps;
  ps.push_back(make_param("bx", param_type::integer, {32, 64, 128}));
  ps.push_back(make_param("mode", param_type::string, {"plain", "shared"}));
  return search_space(std::move(ps), {});
}

std::vector<trial> sample_trials() {
  std::vector<trial> ts;
  trial a;
  a.sequence = 0;
  a.cfg = {0, 1};
  a.st = status::ok;
  a.times_ms = {1.0, 1.5, 1.2};
  const auto s = summarize(a.times_ms);
  a.time_ms = s.median;
  a.time_iqr_ms = s.iqr;
  a.time_min_ms = s.min;
  a.cost.compile = 0.5;
  a.cost.benchmark = 0.01;
  a.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 71.5;
  a.metrics["static.registers"] = 32;
  a.device = "replay:test";
  a.clock_s = 0.51;
  ts.push_back(a);
  trial b;
  b.sequence = 1;
  b.cfg = {2, 0};
  b.st = status::compile_failed;
  b.error = "error: expected ';'\n  at line 3, \"quoted\"";
  b.cost.compile = 0.3;
  b.clock_s = 0.81;
  ts.push_back(b);
  trial c;
  c.sequence = 2;
  c.cfg = {1, 1};
  c.st = status::wrong_result;
  c.error = "max abs error 0.5";
  c.clock_s = 0.9;
  ts.push_back(c);
  return ts;
}

TEST(store, commit_and_read_back) {
  test::temp_dir tmp;
  const auto ts = sample_trials();
  {
    run_store st(tmp.path() / "run");
    st.set_meta("space", describe_space(two_param_space()));
    for (const auto& t : ts)
      st.commit(t);
    EXPECT_THROW(st.commit(ts[0]), error);  // same sequence and configuration
  }
  run_store st(tmp.path() / "run");
  const auto back = st.trials();
  ASSERT_EQ(back.size(), ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(back[i].sequence, ts[i].sequence);
    EXPECT_EQ(back[i].cfg, ts[i].cfg);
    EXPECT_EQ(back[i].st, ts[i].st);
    EXPECT_EQ(back[i].error, ts[i].error);
    EXPECT_EQ(back[i].times_ms, ts[i].times_ms);
    EXPECT_EQ(back[i].metrics, ts[i].metrics);
    EXPECT_DOUBLE_EQ(back[i].clock_s, ts[i].clock_s);
    if (ts[i].ok()) {
      EXPECT_DOUBLE_EQ(back[i].time_ms, ts[i].time_ms);
    } else {
      EXPECT_TRUE(std::isnan(back[i].time_ms));
    }
  }
  const auto sp = space_from_description(st.meta("space"));
  EXPECT_EQ(sp.dimension(), 2u);
  EXPECT_EQ(sp.params()[1].values[1], value("shared"));
}

TEST(store, exports) {
  const auto sp = two_param_space();
  const auto ts = sample_trials();
  std::ostringstream jsonl, csv;
  export_trials(ts, sp, export_format::jsonl, jsonl);
  export_trials(ts, sp, export_format::csv, csv);
  std::istringstream lines(jsonl.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["sequence"], n);
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_NE(csv.str().find("sequence,batch,bx,mode,status,time_ms"), std::string::npos);
  EXPECT_NE(csv.str().find("\"error: expected ';'\n  at line 3, \"\"quoted\"\"\""), std::string::npos)
      << csv.str();
}

TEST(store, kernel_tuner_and_t4_exports_read_back) {
  test::temp_dir tmp;
  const auto sp = two_param_space();
  const auto ts = sample_trials();
  for (auto fmt : {export_format::kernel_tuner, export_format::t4}) {
    std::ostringstream out;
    export_trials(ts, sp, fmt, out, {{"device", "test-gpu"}});
    const auto path =
        test::write_file(tmp.path() / (fmt == export_format::t4 ? "t4.json" : "kt.json"), out.str());
    const auto rec = read_recorded(path.string());
    EXPECT_EQ(rec.format, fmt == export_format::t4 ? "t4" : "kernel_tuner");
    ASSERT_EQ(rec.records.size(), 3u);
    const auto bound = bind_records(rec, sp);
    EXPECT_EQ(bound.unmatched, 0u);
    for (const auto& t : ts) {
      const long i = bound.find(t.cfg);
      ASSERT_GE(i, 0);
      const auto& r = rec.records[static_cast<std::size_t>(i)].result;
      EXPECT_EQ(r.ok(), t.ok());
      if (t.ok()) {
        EXPECT_DOUBLE_EQ(r.time_ms, t.time_ms);
        EXPECT_EQ(r.times_ms, t.times_ms);
      }
      EXPECT_NEAR(r.cost.compile, t.cost.compile, 1e-12);
    }
    // Kernel Tuner's format has no wrong_result: it becomes a runtime failure.
    const auto& wrong = rec.records[static_cast<std::size_t>(bound.find(ts[2].cfg))].result;
    EXPECT_EQ(wrong.st, fmt == export_format::t4 ? status::wrong_result : status::launch_failed);
  }
}

}  // namespace
}  // namespace kf
