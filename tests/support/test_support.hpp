// Helpers shared by the test suites.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kforge/evaluator.hpp"
#include "kforge/kernel.hpp"

namespace kf::test {

/// The repository root (compile-time path of the checkout being tested).
std::filesystem::path source_dir();

/// ../shared/data next to the checkout, or $KFORGE_SHARED_DATA when set; nullopt when absent.
/// Data there is read at run time and never copied into the repository.
std::optional<std::filesystem::path> shared_data_dir();

/// A fresh, empty temporary directory, removed when the returned object dies.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Writes `text` to `path` (creating parent folders) and returns the path.
std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text);

/// Runs a shell command, returning its exit status and combined stdout+stderr.
struct command_result {
  int status = -1;
  std::string output;
};
command_result run_command(const std::string& command);

/// A Python interpreter that can import `module`: $KFORGE_PYTHON when set, else <repo>/.venv/bin/python,
/// else python3 from PATH. nullopt when none can; `why` then says what was tried.
std::optional<std::string> python_with(const std::string& module, std::string& why);

/// The kernel suite: every experiments/kernels/<name>/kernel.yaml under the source tree but the fixtures
/// (`planted` faults on purpose), sorted. Found at run time.
std::vector<std::filesystem::path> suite_kernels();
/// <name> of experiments/kernels/<name>/kernel.yaml.
std::string suite_kernel_name(const std::filesystem::path& yaml);
/// experiments/kernels/<name>/kernel.yaml of the suite; empty when there is none.
std::filesystem::path suite_kernel_yaml(const std::string& name);
/// The suite kernel's description, the built-in plug-ins registered; throws kf::error naming the kernel
/// when the suite has none of that name.
kernel_spec load_suite_kernel(const std::string& name);
/// The value of parameter `name` in `c` as Python's str() writes it ("?" when the space has no such
/// parameter), and as an integer (throws when it is not one).
std::string param_value(const kernel_spec& k, const config& c, const char* name);
int int_param(const kernel_spec& k, const config& c, const char* name);
/// The configurations every suite check runs: the baseline (k.defaults) first, then `n` random valid
/// ones drawn with a seed derived from the kernel's name (the same genomes in CI's compile test and in
/// the GPU correctness test).
std::vector<config> suite_genomes(const kernel_spec& k, const std::string& name, int n);

/// A synthetic evaluator's body: each request becomes a trial with its sequence, its configuration and a
/// benchmark cost of 1, which `fill` completes (status, time, metrics). `evaluator{trial_filler{f}}`.
struct trial_filler {
  std::function<void(trial&)> fill;
  std::vector<trial> evaluate(std::span<const evaluation_request> batch) const;
};

}  // namespace kf::test

/// Skips the current test with a visible reason when ../shared/data is absent; otherwise binds
/// `var` to its path.
#define KF_REQUIRE_SHARED_DATA(var)                                                                \
  const auto var##_opt = ::kf::test::shared_data_dir();                                            \
  if (!var##_opt) GTEST_SKIP() << "../shared/data is absent (set KFORGE_SHARED_DATA to run this)"; \
  const std::filesystem::path var = *var##_opt
