// Alternatives of a space (find_alternatives) and hybrid's stratified initial design and immigrants:
// which parameters count as alternatives, that the first k initial draws cover all k of them, that
// spaces without alternatives are drawn exactly as before, and the suite's gemm_bf16 and sgemm.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kforge/evaluator.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kernel.hpp"
#include "kforge/kforge.hpp"
#include "kforge/strategies/common.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

using strategies::find_alternatives;

std::vector<value> ints(int from, int to) {
  std::vector<value> v;
  for (int i = from; i <= to; ++i)
    v.emplace_back(i);
  return v;
}

// impl 'simple' has its own `a` (64 values), impl 'fast' its own `b` (4 values); each pins the other's
// parameter, so 'fast' is 8 of 136 configurations. `mode` is a balanced choice that pins nothing;
// `order` an ordered parameter.
search_space two_implementations() {
  std::vector<param> ps;
  ps.push_back(make_param("impl", param_type::string, {value("simple"), value("fast")}));
  ps.back().ordered = false;
  ps.push_back(make_param("a", param_type::integer, ints(1, 64)));
  ps.push_back(make_param("b", param_type::integer, ints(1, 4)));
  ps.push_back(make_param("mode", param_type::string, {value("x"), value("y")}));
  ps.back().ordered = false;
  return search_space(std::move(ps), {"impl == 'fast' or b == 1", "impl == 'simple' or a == 1"});
}

TEST(Alternatives, AnUnbalancedChoiceThatPinsParametersIsOneABalancedOneIsNot) {
  const auto space = two_implementations();
  ASSERT_EQ(space.valid().size(), 2u * (64 + 4));
  const auto alts = find_alternatives(space);
  ASSERT_EQ(alts.size(), 1u);
  EXPECT_EQ(space.params()[alts[0].param].name, "impl");
  ASSERT_EQ(alts[0].members.size(), 2u);
  EXPECT_EQ(alts[0].members[0].size(), 128u);  // simple: 64 a x 2 modes
  EXPECT_EQ(alts[0].members[1].size(), 8u);    // fast: 4 b x 2 modes
  for (std::size_t k = 0; k < 2; ++k)
    for (const auto pos : alts[0].members[k])
      EXPECT_EQ(space.valid().at(pos)[alts[0].param], alts[0].values[k]);
}

TEST(Alternatives, BalancedImplementationsNeedNoStrata) {
  // The same pinning with equal shares: a uniform draw reaches both, so there is nothing to stratify.
  std::vector<param> ps;
  ps.push_back(make_param("impl", param_type::string, {value("simple"), value("fast")}));
  ps.back().ordered = false;
  ps.push_back(make_param("a", param_type::integer, ints(1, 4)));
  ps.push_back(make_param("b", param_type::integer, ints(1, 4)));
  const search_space space(std::move(ps), {"impl == 'fast' or b == 1", "impl == 'simple' or a == 1"});
  EXPECT_TRUE(find_alternatives(space).empty());
}

TEST(Alternatives, ALargeLooselyConstrainedSpaceIsNotEnumeratedToFindThem) {
  // 2 x 100^4 = 2e8 configurations, about 1e8 valid: over the 4e6 that strata may list. The estimate from
  // unconstrained draws says so before any enumeration.
  std::vector<param> ps;
  ps.push_back(make_param("impl", param_type::string, {value("a"), value("b")}));
  ps.back().ordered = false;
  for (const char* name : {"x1", "x2", "x3", "x4"})
    ps.push_back(make_param(name, param_type::integer, ints(1, 100)));
  const search_space space(std::move(ps), {"impl == 'a' or x1 == 1"});
  EXPECT_TRUE(find_alternatives(space).empty());
  EXPECT_FALSE(space.enumerated());
}

// Times from a hash of the configuration: the same distribution for every implementation.
void time_by_hash(trial& t) {
  t.st = status::ok;
  std::uint64_t h = 1469598103934665603ull;
  for (const auto v : t.cfg)
    h = (h ^ v) * 1099511628211ull;
  t.time_ms = 1.0 + static_cast<double>(h % 1000) / 1000.0;
}

std::vector<config> hybrid_trials(const search_space& space, const nlohmann::json& params, std::uint64_t seed,
                                  std::size_t evaluations) {
  auto s = strategy_registry().create({"hybrid", params, {}});
  evaluator e{test::trial_filler{time_by_hash}};
  budget_spec b;
  b.evaluations = evaluations;
  const auto r = run_loop(space, s, e, b, seed, 1, nullptr, {});
  std::vector<config> seq;
  for (const auto& t : r.history.trials())
    seq.push_back(t.cfg);
  return seq;
}

TEST(Alternatives, HybridsFirstDrawsCoverEveryAlternative) {
  register_builtins();
  const auto space = two_implementations();
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto seq = hybrid_trials(space, nlohmann::json::object(), seed, 2);
    ASSERT_EQ(seq.size(), 2u);
    EXPECT_NE(seq[0][0], seq[1][0]) << "seed " << seed << ": both initial draws in one implementation";
  }
}

TEST(Alternatives, UniformDrawsAreUnchangedWhereThereAreNoAlternatives) {
  // On a space without alternatives, stratified and uniform are the same run, draw for draw.
  register_builtins();
  std::vector<param> ps;
  ps.push_back(make_param("x", param_type::integer, ints(1, 16)));
  ps.push_back(make_param("y", param_type::integer, ints(1, 16)));
  ps.push_back(make_param("m", param_type::string, {value("p"), value("q"), value("r")}));
  ps.back().ordered = false;
  const search_space space(std::move(ps), {"x * y <= 128"});
  ASSERT_TRUE(find_alternatives(space).empty());
  const auto a = hybrid_trials(space, nlohmann::json::object(), 7, 40);
  const auto b = hybrid_trials(space, {{"alternatives", "uniform"}}, 7, 40);
  EXPECT_EQ(a, b);
}

kernel_spec suite_kernel(const std::string& name) {
  return test::load_suite_kernel(name);
}

std::set<std::string> alternative_names(const search_space& space) {
  std::set<std::string> names;
  for (const auto& a : find_alternatives(space))
    names.insert(space.params()[a.param].name);
  return names;
}

TEST(Alternatives, TheSuitesImplementationChoicesAreFoundAndNothingElse) {
  register_builtins();
  const auto gemm = suite_kernel("gemm_bf16");
  EXPECT_EQ(alternative_names(gemm.space), std::set<std::string>{"tensor_core_gemm"});
  const auto sgemm = suite_kernel("sgemm");
  EXPECT_EQ(alternative_names(sgemm.space), std::set<std::string>{"impl"});
  for (const char* name : {"softmax", "saxpy", "transpose"})
    EXPECT_TRUE(alternative_names(suite_kernel(name).space).empty()) << name;
}

TEST(Alternatives, HybridTriesGemmBf16sWgmmaPathInItsInitialDesign) {
  // wgmma is 1.2% of gemm_bf16's valid set: 10 uniform draws miss it ~89% of the time.
  register_builtins();
  const auto k = suite_kernel("gemm_bf16");
  const auto p = *k.space.param_index("tensor_core_gemm");
  const auto wgmma = *k.space.value_index(p, value("wgmma"));
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto seq = hybrid_trials(k.space, nlohmann::json::object(), seed, 10);
    std::set<std::uint32_t> impls;
    for (const auto& c : seq)
      impls.insert(c[p]);
    EXPECT_EQ(impls.size(), 3u) << "seed " << seed;
    EXPECT_TRUE(impls.count(wgmma)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace kf
