// Fuzzing the experiment-config reader: thousands of random mutations of valid configs (text-level and
// tree-level) must each either load or fail with a kf::config_error that names the file — never another
// exception, a crash or a hang.
#include <gtest/gtest.h>

#include <random>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

std::string valid_yaml() {
  const auto root = test::source_dir() / "experiments/stencil2d-h200";
  return "name: fuzz\n"
         "problem: {t1: " +
         (root / "T1.json").string() +
         "}\n"
         "strategy:\n  type: ga\n  params: {population_size: 12, mutation_rate: 0.2, crossover: two_point}\n"
         "evaluator: {type: replay, params: {file: " +
         (root / "cache.json").string() +
         ", parallelism: 2}}\n"
         "budget: {evaluations: 40, simulated_time_s: 100.5}\n"
         "seed: 7\nbatch_size: 4\noutput: runs/fuzz\n";
}

enum class outcome { loaded, config_error };

outcome try_load(const std::string& text) {
  try {
    const auto doc = parse_document(text, "fuzz.yaml", test::source_dir());
    (void)parse_experiment(doc);
    return outcome::loaded;
  } catch (const config_error& e) {
    EXPECT_NE(e.file().find("fuzz.yaml"), std::string::npos)
        << "error does not name the config file: " << e.what();
    return outcome::config_error;
  }
  // Any other exception escapes and fails the test with its message.
}

TEST(config_fuzz, valid_config_loads) {
  EXPECT_EQ(try_load(valid_yaml()), outcome::loaded);
}

TEST(config_fuzz, text_mutations) {
  register_builtins();
  const std::string base = valid_yaml();
  const std::string alphabet = "abcxyz019_:{}[],'\"#-. \n\t!&*|>%@`";
  std::mt19937_64 gen(20261202);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(gen() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const std::size_t pos = gen() % s.size();
      switch (gen() % 5) {
        case 0:
          s.erase(pos, 1 + gen() % 3);
          break;
        case 1:
          s.insert(pos, 1, alphabet[gen() % alphabet.size()]);
          break;
        case 2:
          s[pos] = alphabet[gen() % alphabet.size()];
          break;
        case 3:
          s.resize(pos);
          break;   // truncation
        case 4: {  // duplicate a random slice elsewhere
          const std::size_t len = gen() % 20;
          const std::string slice = s.substr(pos, len);
          s.insert(gen() % s.size(), slice);
          break;
        }
      }
    }
    SCOPED_TRACE(s);
    (try_load(s) == outcome::loaded ? loaded : refused)++;
    if (HasFailure()) break;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(loaded, 10);
}

TEST(config_fuzz, tree_mutations) {
  register_builtins();
  const auto base = parse_document(valid_yaml(), "fuzz.yaml", test::source_dir()).root;
  const std::vector<nlohmann::json> odd_values = {nullptr,
                                                  true,
                                                  -1,
                                                  0,
                                                  3.5,
                                                  1e300,
                                                  -1e-300,
                                                  "",
                                                  "x",
                                                  "ga",
                                                  nlohmann::json::array(),
                                                  nlohmann::json::array({1, "a"}),
                                                  nlohmann::json::object(),
                                                  {{"type", "random"}},
                                                  {{"k", 1}},
                                                  "1 +* 2",
                                                  "[i for i in range(3)]",
                                                  9223372036854775807LL};
  std::mt19937_64 gen(7);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    auto j = base;
    // Pick a random node by walking down.
    nlohmann::json* node = &j;
    const int depth = static_cast<int>(gen() % 4);
    for (int d = 0; d < depth && node->is_structured() && !node->empty(); ++d) {
      auto it = node->begin();
      std::advance(it, static_cast<long>(gen() % node->size()));
      node = &*it;
    }
    switch (gen() % 4) {
      case 0:
        *node = odd_values[gen() % odd_values.size()];
        break;
      case 1:
        if (node->is_object() && !node->empty()) {
          auto it = node->begin();
          std::advance(it, static_cast<long>(gen() % node->size()));
          node->erase(it.key());
        }
        break;
      case 2:
        if (node->is_object())
          (*node)["unexpected_" + std::to_string(gen() % 3)] = odd_values[gen() % odd_values.size()];
        break;
      case 3:
        *node = nlohmann::json::array({*node});
        break;
    }
    // Back to text (JSON is YAML) so that the whole reader runs.
    SCOPED_TRACE(j.dump());
    refused += try_load(j.dump()) == outcome::config_error;
    if (HasFailure()) break;
  }
  EXPECT_GT(refused, 1500);
}

}  // namespace
}  // namespace kf
