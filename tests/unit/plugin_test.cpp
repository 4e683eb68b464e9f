// Shared-library plug-ins (kforge/plugin.hpp): loaded from a config's `plugins:` and from --plugin, one
// entry symbol, the ABI check, and every failure a config_error naming the file and the key.
#include <gtest/gtest.h>

#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "kforge/plugin.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

std::string plugin_file(const std::string& which) {
  return std::string(KFORGE_BINARY_DIR) + "/test-plugins/test_plugin_" + which + ".so";
}

std::string load_error(const std::string& file) {
  try {
    load_plugin(file, {"cfg.yaml", "plugins[0]"});
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), "cfg.yaml");
    EXPECT_EQ(e.key_path(), "plugins[0]");
    return e.what();
  }
  return "(loaded)";
}

TEST(plugins, a_good_plugin_registers_and_loads_once) {
  register_builtins();
  const auto& p = load_plugin(plugin_file("good"), {"cfg.yaml", "plugins[0]"});
  EXPECT_TRUE(strategy_registry().contains("test_plugin_first"));
  EXPECT_TRUE(transform_registry().contains("test_plugin_noop"));
  const std::vector<std::string> added = {"strategy test_plugin_first", "transform test_plugin_noop"};
  EXPECT_EQ(p.added, added);
  // Again: the same plug-in, nothing registered twice.
  const auto& again = load_plugin(plugin_file("good"), {"cfg.yaml", "plugins[0]"});
  EXPECT_EQ(&p, &again);
}

TEST(plugins, another_abi_is_refused_with_both_versions) {
  const auto msg = load_error(plugin_file("wrong_abi"));
  EXPECT_NE(msg.find("was built against kforge plug-in ABI 9999"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has ABI " + std::to_string(KFORGE_PLUGIN_ABI_VERSION)), std::string::npos) << msg;
  EXPECT_NE(msg.find("rebuild it"), std::string::npos) << msg;
}

TEST(plugins, a_failing_registration_is_reported) {
  const auto msg = load_error(plugin_file("throws"));
  EXPECT_NE(msg.find("failed to register"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'random' is already registered"), std::string::npos) << msg;
}

TEST(plugins, missing_files_and_other_libraries_are_config_errors) {
  auto msg = load_error("/nonexistent/x.so");
  EXPECT_NE(msg.find("is not a file"), std::string::npos) << msg;
  test::temp_dir tmp;
  const auto junk = test::write_file(tmp.path() / "junk.so", "not an ELF file");
  msg = load_error(junk.string());
  EXPECT_NE(msg.find("cannot load plug-in"), std::string::npos) << msg;
  msg = load_error("/lib/x86_64-linux-gnu/libz.so.1");
  EXPECT_NE(msg.find("is not a kforge plug-in"), std::string::npos) << msg;
}

TEST(plugins, a_config_loads_its_plugins_relative_to_itself) {
  test::temp_dir tmp;
  const auto cfg = test::write_file(
      tmp.path() / "e.yaml",
      "problem: {t1: " + (test::source_dir() / "experiments/stencil2d-h200/T1.json").string() +
          "}\nplugins: [" + plugin_file("good") +
          "]\nstrategy: test_plugin_first\nevaluator: {type: replay, params: {file: " +
          (test::source_dir() / "experiments/stencil2d-h200/cache.json").string() +
          "}}\nbudget: {evaluations: 5}\n");
  const auto spec = load_experiment(cfg.string());
  ASSERT_EQ(spec.plugins.size(), 1u);
  EXPECT_EQ(spec.strategy.type, "test_plugin_first");
  // A bad entry names the key.
  const auto bad = test::write_file(tmp.path() / "bad.yaml", "plugins: [missing.so]\nproblem: {t1: x}\n");
  try {
    load_experiment(bad.string());
    FAIL() << "loaded";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("plugins[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing.so"), std::string::npos) << e.what();
  }
}

TEST(plugins, the_cli_loads_them_with_the_plugin_option) {
  const std::string kforge = KFORGE_CLI;
  auto r = test::run_command(kforge + " plugins --plugin " + plugin_file("good"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("test_plugin_first"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("plug-ins loaded"), std::string::npos) << r.output;
  r = test::run_command(kforge + " plugins --plugin=" + plugin_file("wrong_abi"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--plugin"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ABI 9999"), std::string::npos) << r.output;
  r = test::run_command(kforge + " run --plugin");
  EXPECT_EQ(r.status, 2) << r.output;
}

}  // namespace
}  // namespace kf
