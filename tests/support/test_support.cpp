#include "support/test_support.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "kforge/error.hpp"
#include "kforge/kforge.hpp"
#include "kforge/random.hpp"

namespace kf::test {

std::filesystem::path source_dir() {
  return KFORGE_SOURCE_DIR;
}

std::optional<std::filesystem::path> shared_data_dir() {
  if (const char* env = std::getenv("KFORGE_SHARED_DATA"); env && *env) {
    if (std::filesystem::is_directory(env)) return std::filesystem::path(env);
    return std::nullopt;
  }
  auto p = source_dir().parent_path() / "shared" / "data";
  if (std::filesystem::is_directory(p / "tuning-spaces")) return p;
  return std::nullopt;
}

temp_dir::temp_dir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int i = 0; i < 100; ++i) {
    auto p = base / ("kforge-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  return path;
}

command_result run_command(const std::string& command) {
  command_result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0)
    r.output.append(buf.data(), n);
  const int st = ::pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::optional<std::string> python_with(const std::string& module, std::string& why) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KFORGE_PYTHON"); env && *env) candidates.emplace_back(env);
  if (const auto venv = source_dir() / ".venv/bin/python"; std::filesystem::exists(venv))
    candidates.push_back(venv.string());
  candidates.emplace_back("python3");
  why.clear();
  for (const auto& py : candidates) {
    const auto r = run_command(py + " -c 'import " + module + "'");
    if (r.status == 0) return py;
    why += (why.empty() ? "" : "; ") + py + ": cannot import " + module;
  }
  why += " (pip install -r python/requirements.txt into <repo>/.venv, or set KFORGE_PYTHON)";
  return std::nullopt;
}

}  // namespace kf::test

namespace kf::test {

std::vector<std::filesystem::path> suite_kernels() {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  const auto root = source_dir() / "experiments" / "kernels";
  if (!fs::is_directory(root)) return out;
  for (const auto& d : fs::directory_iterator(root))
    if (d.is_directory() && d.path().filename() != "planted" && fs::is_regular_file(d.path() / "kernel.yaml"))
      out.push_back(d.path() / "kernel.yaml");
  std::sort(out.begin(), out.end());
  return out;
}

std::string suite_kernel_name(const std::filesystem::path& yaml) {
  return yaml.parent_path().filename().string();
}

std::filesystem::path suite_kernel_yaml(const std::string& name) {
  for (const auto& p : suite_kernels())
    if (suite_kernel_name(p) == name) return p;
  return {};
}

kernel_spec load_suite_kernel(const std::string& name) {
  register_builtins();
  const auto yaml = suite_kernel_yaml(name);
  if (yaml.empty()) throw error("no experiments/kernels/" + name + "/kernel.yaml in the suite");
  return load_kernel_spec(yaml.string());
}

std::string param_value(const kernel_spec& k, const config& c, const char* name) {
  const auto i = k.space.param_index(name);
  return i ? k.space.value_of(c, *i).str() : std::string("?");
}

int int_param(const kernel_spec& k, const config& c, const char* name) {
  return std::stoi(param_value(k, c, name));
}

std::vector<config> suite_genomes(const kernel_spec& k, const std::string& name, int n) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: the same seed on every platform
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  rng r(h % 100000 + 17);
  std::vector<config> out{k.defaults};
  for (int i = 0; i < n; ++i)
    out.push_back(k.space.sample(r));
  return out;
}

std::vector<trial> trial_filler::evaluate(std::span<const evaluation_request> batch) const {
  std::vector<trial> out;
  for (const auto& r : batch) {
    trial t;
    t.sequence = r.sequence;
    t.cfg = r.cfg;
    t.cost.benchmark = 1.0;
    fill(t);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kf::test
