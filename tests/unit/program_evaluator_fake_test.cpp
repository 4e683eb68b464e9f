// The program evaluator on a machine without a GPU: the runner spawns real program workers
// (python/kforge/triton/program_worker.py --fake: numpy instead of torch) that run a fake Triton program
// (tests/python/programs/fake_ops.py) whose MODE literal plants a fault. Every fault must become a trial
// with the right status, and workers that die, hang or report a broken device must come back.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/store.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

std::filesystem::path write_experiment(const test::temp_dir& tmp, const std::string& python,
                                       const std::string& problem_extra, const std::string& evaluator_extra,
                                       const std::string& inputs_function = "axpy_shapes") {
  const auto programs = test::source_dir() / "tests/python/programs";
  return test::write_file(
      tmp.path() / "e.yaml",
      "problem:\n  program: " + (programs / "fake_ops.py").string() + "\n  call: axpy\n  inputs: " +
          (programs / "fake_inputs.py").string() + ":" + inputs_function + "\n" + problem_extra +
          "strategy: brute_force\n"
          "evaluator: {type: program, params: {python: " +
          python + ", worker_args: [--fake], cache_dir: " + (tmp.path() / "cache").string() +
          ", min_repeats: 5, max_repeats: 10, max_timing_seconds: 0.5" + evaluator_extra +
          "}}\nbatch_size: 2\noutput: " + (tmp.path() / "run").string() + "\n");
}

// Every test here runs real program workers under a Python with numpy (skipped, with the reason,
// without one), in a folder of its own.
class program_evaluator_fake : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    python_ = test::python_with("numpy", why);
    if (!python_) GTEST_SKIP() << why;
    register_builtins();
  }
  const std::string& python() const { return *python_; }

  test::temp_dir tmp;

 private:
  std::optional<std::string> python_;
};

TEST_F(program_evaluator_fake, every_fault_is_a_trial_and_workers_come_back) {
  const auto cfg = write_experiment(
      tmp, python(),
      "  parameters:\n    - {name: MODE, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], knob: {literal: axpy}}\n"
      "    - {name: num_warps, values: [4], knob: {launch: axpy}}\n",
      ", devices: [0, 1], request_timeout_s: 3");
  const auto spec = load_experiment(cfg.string());
  EXPECT_EQ(spec.prob.source_kind, "program");
  const auto res = run_experiment(spec, {});
  ASSERT_EQ(res.history.size(), 10u);
  std::map<std::int64_t, const trial*> by_mode;
  for (const auto& t : res.history.trials())
    by_mode[spec.prob.space.value_of(t.cfg, 0).as_int()] = &t;
  const std::map<std::int64_t, status> expected = {
      {0, status::ok},      {1, status::wrong_result}, {2, status::wrong_result},  {3, status::crashed},
      {4, status::timeout}, {5, status::crashed},      {6, status::launch_failed}, {7, status::wrong_result},
      {8, status::ok},      {9, status::timeout}};
  for (const auto& [mode, st] : expected) {
    ASSERT_TRUE(by_mode.count(mode)) << mode;
    const trial& t = *by_mode[mode];
    EXPECT_EQ(t.st, st) << "MODE " << mode << ": " << t.error;
    if (t.ok()) {
      EXPECT_GE(t.times_ms.size(), 5u);
      EXPECT_TRUE(t.metrics.count("time.kernels_ms.shape2")) << "MODE " << mode;
      EXPECT_EQ(t.device.rfind("cuda:", 0), 0u) << t.device;
    } else {
      EXPECT_FALSE(t.error.empty()) << "MODE " << mode;
    }
  }
  EXPECT_NE(by_mode[2]->error.find("returned[0]"), std::string::npos) << by_mode[2]->error;
  EXPECT_NE(by_mode[7]->error.find("argument 0"), std::string::npos) << by_mode[7]->error;
  // A compile past compile_timeout_s is the worker's answer (it goes on), not the runner's kill.
  EXPECT_NE(by_mode[9]->error.find("took longer than"), std::string::npos) << by_mode[9]->error;
  // The worker that died (twice: MODE 3 is retried once), hung and faulted were replaced.
  run_store st(tmp.path() / "run");
  const auto ev = st.meta("evaluator");
  EXPECT_EQ(ev["type"], "program");
  int restarts = 0;
  for (const auto& w : ev["workers"])
    restarts += w["restarts"].get<int>();
  EXPECT_GE(restarts, 4) << ev.dump();
}

TEST_F(program_evaluator_fake, a_knob_that_does_not_apply_is_an_invalid_trial) {
  const auto cfg =
      write_experiment(tmp, python(),
                       "  parameters:\n    - {name: BLOCK, values: [32, 64], knob: {launch: axpy}}\n"
                       "    - {name: WIDTH, values: [1], knob: {launch: 'axpy', target: NOT_A_CONSTEXPR}}\n",
                       ", devices: [0]");
  const auto res = run_experiment(load_experiment(cfg.string()), {});
  ASSERT_EQ(res.history.size(), 2u);
  for (const auto& t : res.history.trials()) {
    EXPECT_EQ(t.st, status::invalid);
    EXPECT_NE(t.error.find("NOT_A_CONSTEXPR"), std::string::npos) << t.error;
  }
}

// A launch option's knob may keep the source's own value ("as written", source_ops.AS_WRITTEN: the default of
// an option the source computes): the list mixes a string with numbers, so the parameter is an enum, and
// the worker leaves the launch as it is for that value and overrides it for the others.
TEST_F(program_evaluator_fake, a_launch_option_as_written_is_a_value_of_its_knob) {
  const auto cfg = write_experiment(
      tmp, python(),
      "  parameters:\n    - {name: num_warps, values: ['as written', 2, 8], default: 'as written', "
      "knob: {launch: axpy}}\n",
      ", devices: [0]");
  const auto spec = load_experiment(cfg.string());
  EXPECT_EQ(spec.prob.space.params()[0].type, param_type::string);
  EXPECT_EQ(spec.prob.space.value_of(spec.prob.program_desc->defaults, 0), value("as written"));
  const auto res = run_experiment(spec, {});
  ASSERT_EQ(res.history.size(), 3u);
  for (const auto& t : res.history.trials())
    EXPECT_EQ(t.st, status::ok) << spec.prob.space.value_of(t.cfg, 0).repr() << ": " << t.error;
}

// `python: python3` (the default) is a name looked up on PATH, as a shell would: the H200 image's python3
// is not at a fixed path (the first GPU run failed with "cannot start python3").
TEST_F(program_evaluator_fake, a_python_given_by_name_is_found_on_path) {
  const std::filesystem::path exe(python());
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (exe.parent_path().string() + ":" + old_path).c_str(), 1);
  const auto cfg = write_experiment(tmp, exe.filename().string(),
                                    "  parameters:\n    - {name: MODE, values: [0], knob: {literal: axpy}}\n",
                                    ", devices: [0]");
  const auto res = run_experiment(load_experiment(cfg.string()), {});
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_EQ(res.history.size(), 1u);
  EXPECT_EQ(res.history.trials()[0].st, status::ok) << res.history.trials()[0].error;
}

// A compile limit the runner's kill would pre-empt is misuse, named by its key; by default the limit
// stays below the request timeout (half of it here), so the fake test above gets its timeout trial.
TEST_F(program_evaluator_fake, a_compile_limit_past_the_request_timeout_is_refused) {
  const auto cfg = write_experiment(tmp, python(),
                                    "  parameters:\n    - {name: MODE, values: [0], knob: {literal: axpy}}\n",
                                    ", devices: [0], request_timeout_s: 10, compile_timeout_s: 10");
  try {
    run_experiment(load_experiment(cfg.string()), {});
    FAIL() << "compile_timeout_s: 10 with request_timeout_s: 10 was accepted";
  } catch (const kf::error& e) {
    EXPECT_NE(std::string(e.what()).find("compile_timeout_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("request_timeout_s (10 s)"), std::string::npos) << e.what();
  }
}

// `adapter: FILE:FUNCTION` binds the callable: here it unpacks one tuple argument per call (how
// TritonBench-G's harnesses call their operators). The faults still come back as their statuses.
TEST_F(program_evaluator_fake, an_adapter_binds_the_callable) {
  const auto programs = test::source_dir() / "tests/python/programs";
  const auto cfg = write_experiment(
      tmp, python(),
      "  adapter: " + (programs / "fake_inputs.py").string() +
          ":bind_packed\n  parameters:\n    - {name: MODE, values: [0, 1], knob: {literal: axpy}}\n",
      ", devices: [0]", "axpy_packed_shapes");
  const auto res = run_experiment(load_experiment(cfg.string()), {});
  ASSERT_EQ(res.history.size(), 2u);
  for (const auto& t : res.history.trials()) {
    const auto mode = load_experiment(cfg.string()).prob.space.value_of(t.cfg, 0).as_int();
    EXPECT_EQ(t.st, mode == 0 ? status::ok : status::wrong_result) << t.error;
  }
}

// An original that does not reproduce itself (fake_ops.py's `noisy`) fails every variant the same way:
// the run records the trials that came back and stops with the reason, instead of spending its budget.
TEST_F(program_evaluator_fake, a_failed_original_stops_the_run_with_its_reason) {
  const auto first = write_experiment(
      tmp, python(),
      "  parameters:\n    - {name: num_warps, values: [1, 2, 4, 8, 16], knob: {launch: axpy}}\n",
      ", devices: [0]");
  std::ifstream in(first);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("call: axpy"), 10, "call: noisy");
  const auto cfg = test::write_file(tmp.path() / "noisy.yaml", text);
  try {
    run_experiment(load_experiment(cfg.string()), {});
    FAIL() << "the run went on";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot serve as the reference"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not reproducible"), std::string::npos) << e.what();
  }
  run_store st(tmp.path() / "run");
  EXPECT_GE(st.trial_count(), 1u);
  EXPECT_LT(st.trial_count(), 5u);
}

TEST(program_problem, config_errors_name_the_key) {
  register_builtins();
  test::temp_dir tmp;
  const auto programs = test::source_dir() / "tests/python/programs";
  auto expect_error = [&](const std::string& problem, const std::string& words) {
    const auto cfg = test::write_file(
        tmp.path() / "e.yaml", "problem:\n" + problem + "strategy: random\nevaluator: {type: program}\n");
    try {
      (void)load_experiment(cfg.string());
      ADD_FAILURE() << "no error for: " << problem;
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("e.yaml"), std::string::npos) << e.what();
    }
  };
  const std::string prog = "  program: " + (programs / "fake_ops.py").string() + "\n";
  const std::string inputs = "  inputs: " + (programs / "fake_inputs.py").string() + ":axpy_shapes\n";
  const std::string param = "  parameters: [{name: B, values: [1, 2], knob: {literal: axpy}}]\n";
  expect_error("  program: nope.py\n  call: f\n" + inputs + param, "problem.program");
  expect_error(prog + inputs + param, "missing key 'call'");
  expect_error(prog + "  call: axpy\n  inputs: fake_inputs.py\n" + param, "FILE.py:FUNCTION");
  expect_error(prog + "  call: axpy\n" + inputs, "expected parameters");
  expect_error(prog + "  call: axpy\n" + inputs + "  parameters: [{name: B, values: [1, 2]}]\n",
               "missing key 'knob'");
  expect_error(prog + "  call: axpy\n" + inputs +
                   "  parameters: [{name: B, values: [1], knob: {literal: a, autotune: k}}]\n",
               "exactly one of");
  expect_error(
      prog + "  call: axpy\n" + inputs + "  parameters: [{name: B, values: [1], knob: {literl: a}}]\n",
      "problem.parameters[0].knob.literl");
  expect_error(prog + "  call: axpy\n" + inputs + param + "  tolerance: {f33: {rel: 1}}\n", "not a dtype");
  expect_error(prog + "  call: axpy\n" + inputs + param + "  time_shapes: [x]\n", "problem.time_shapes[0]");
  expect_error(prog + "  call: axpy\n" + inputs + param + "  kernel: k.yaml\n", "problem.kernel");
  expect_error(prog + "  call: axpy\n" + inputs + param + "  adapter: fake_inputs.py\n", "problem.adapter");
  expect_error(prog + "  call: axpy\n" + inputs + param + "  adapter: nope.py:bind\n", "no such file");
}

// `start: default` of a program problem is the program's own configuration (its parameters' defaults).
TEST(program_problem, start_default_is_the_programs_own_configuration) {
  register_builtins();
  test::temp_dir tmp;
  const auto programs = test::source_dir() / "tests/python/programs";
  const auto cfg =
      test::write_file(tmp.path() / "e.yaml",
                       "problem:\n  program: " + (programs / "fake_ops.py").string() +
                           "\n  call: axpy\n  inputs: " + (programs / "fake_inputs.py").string() +
                           ":axpy_shapes\n  parameters:\n    - {name: MODE, values: [0, 1, 2], default: 2, "
                           "knob: {literal: axpy}}\n"
                           "    - {name: num_warps, values: [1, 2, 4, 8], default: 4, knob: {launch: axpy}}\n"
                           "strategy: random\nevaluator: {type: program}\nstart: default\n");
  const auto spec = load_experiment(cfg.string());
  ASSERT_EQ(spec.start.size(), 1u);
  EXPECT_EQ(spec.prob.space.describe(spec.start[0]), "{MODE=2, num_warps=4}");
}

TEST(program_problem, the_example_programs_load) {
  register_builtins();
  const auto softmax =
      load_experiment((test::source_dir() / "experiments/programs/softmax/experiment.yaml").string());
  ASSERT_TRUE(softmax.prob.program_desc);
  EXPECT_EQ(softmax.prob.space.valid().size(), 4u * 6u * 4u);
  EXPECT_EQ(softmax.prob.program_desc->knobs[1].kind, "launch");
  EXPECT_EQ(softmax.prob.program_desc->knobs[1].target, "num_warps");
  // TritonBench-G's operator is read from the shared data beside the repository, when it is there.
  if (!test::shared_data_dir()) GTEST_SKIP() << "../shared/data is missing";
  const auto add =
      load_experiment((test::source_dir() / "experiments/programs/tritonbench-g/add_example.yaml").string());
  EXPECT_EQ(add.prob.program_desc->end_marker, "#####");
  EXPECT_EQ(add.prob.space.describe(add.prob.program_desc->defaults),
            "{BLOCK_SIZE=4, num_warps=4, num_stages=3}");
}

}  // namespace
}  // namespace kf
