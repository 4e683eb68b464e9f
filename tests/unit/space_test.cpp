#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kforge/error.hpp"
#include "kforge/space.hpp"

namespace kf {
namespace {

search_space small_space() {
  std::vector<param> ps;
  ps.push_back(make_param("bx", param_type::integer, {16, 32, 64, 128}));
  ps.push_back(make_param("by", param_type::integer, {1, 2, 4, 8}));
  ps.push_back(make_param("shmem", param_type::boolean, {0, 1}));
  ps.push_back(make_param("algo", param_type::string, {"a", "b", "c"}));
  return search_space(std::move(ps), {"32 <= bx * by <= 256", "shmem or algo != 'c'"});
}

// Brute force over the cartesian product with check(): the reference for enumeration.
std::set<config> brute_force(const search_space& sp) {
  std::set<config> out;
  config c(sp.dimension(), 0);
  while (true) {
    if (sp.check(c)) out.insert(c);
    std::size_t i = sp.dimension();
    while (i > 0) {
      --i;
      if (++c[i] < sp.params()[i].values.size()) break;
      c[i] = 0;
      if (i == 0) return out;
    }
  }
}

TEST(space, enumeration_matches_brute_force_and_is_lexicographic) {
  const auto sp = small_space();
  const auto& vs = sp.valid();
  const auto ref = brute_force(sp);
  ASSERT_EQ(vs.size(), ref.size());
  std::vector<config> got;
  for (std::size_t i = 0; i < vs.size(); ++i)
    got.push_back(vs.at(i));
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::set<config>(got.begin(), got.end()), ref);
  for (std::size_t i = 0; i < vs.size(); ++i)
    EXPECT_EQ(vs.index_of(got[i]), i);
  EXPECT_EQ(vs.index_of(config{0, 0, 0, 0}), std::nullopt);  // 16*1 < 32
}

TEST(space, constraints_use_python_semantics) {
  std::vector<param> ps;
  ps.push_back(make_param("a", param_type::integer, {-3, -1, 0, 2, 7}));
  ps.push_back(make_param("b", param_type::integer, {-2, 2, 3}));
  // Python: -3 // 2 == -2, -3 % 2 == 1, 7 % -2 == -1.
  const search_space sp(std::move(ps), {"a // b * b + a % b == a", "(a % b) * b >= 0"});
  EXPECT_EQ(sp.valid().size(), 15u);  // both hold for every pair (b != 0)
}

TEST(space, constants_and_unknown_names) {
  std::vector<param> ps;
  ps.push_back(make_param("n", param_type::integer, {1, 2, 3, 4}));
  const search_space sp(ps, {"n * 4 <= limit"}, {{"limit", value(8)}});
  EXPECT_EQ(sp.valid().size(), 2u);
  try {
    search_space bad(ps, {"n * 4 <= limt"});
    FAIL() << "an unknown name must be refused";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown name 'limt'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("constraint 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(search_space(ps, {"n *"}), error);
}

TEST(space, make_param_converts_and_rejects) {
  EXPECT_EQ(make_param("x", param_type::integer, {1.0, 2.0}).values[1], value(2));
  EXPECT_TRUE(make_param("x", param_type::integer, {1.0}).values[0].is_int());
  EXPECT_THROW(make_param("x", param_type::integer, {1.5}), error);
  EXPECT_THROW(make_param("x", param_type::integer, {1, 1}), error);
  EXPECT_THROW(make_param("x", param_type::boolean, {2}), error);
  EXPECT_THROW(make_param("x", param_type::integer, {}), error);
  EXPECT_TRUE(make_param("x", param_type::boolean, {0, 1}).values[1].is_bool());
  EXPECT_FALSE(make_param("x", param_type::string, {"a"}).ordered);
}

TEST(space, sampling_is_uniform_over_valid_configurations) {
  const auto sp = small_space();
  const auto n = sp.valid().size();
  rng r(42);
  std::map<config, int> counts;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    auto c = sp.sample(r);
    ASSERT_TRUE(sp.is_valid(c));
    ++counts[c];
  }
  EXPECT_EQ(counts.size(), n);
  const double expected = static_cast<double>(draws) / static_cast<double>(n);
  double chi2 = 0;
  for (const auto& [c, k] : counts)
    chi2 += (k - expected) * (k - expected) / expected;
  // n - 1 degrees of freedom (about 40): the 99.9% quantile is below 80.
  EXPECT_LT(chi2, 80.0);
}

TEST(space, same_seed_same_samples) {
  const auto sp = small_space();
  rng a(7), b(7), c(8);
  std::vector<config> xa, xb, xc;
  for (int i = 0; i < 20; ++i)
    xa.push_back(sp.sample(a)), xb.push_back(sp.sample(b)), xc.push_back(sp.sample(c));
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
}

TEST(space, neighbourhoods) {
  const auto sp = small_space();
  const config c{1, 1, 0, 0};  // bx=32, by=2, shmem=0, algo=a
  ASSERT_TRUE(sp.is_valid(c));
  for (auto kind : {neighbourhood::hamming, neighbourhood::adjacent, neighbourhood::strictly_adjacent}) {
    for (const auto& n : sp.neighbours(c, kind)) {
      EXPECT_TRUE(sp.is_valid(n));
      EXPECT_NE(n, c);
      int differing = 0;
      for (std::size_t i = 0; i < c.size(); ++i) {
        differing += n[i] != c[i];
        const long step = std::labs(static_cast<long>(n[i]) - static_cast<long>(c[i]));
        if (kind != neighbourhood::hamming && sp.params()[i].ordered) {
          EXPECT_LE(step, 1);
        }
      }
      if (kind != neighbourhood::adjacent) {
        EXPECT_EQ(differing, 1);
      }
    }
  }
  // Hamming: every valid one-gene change, exactly.
  std::size_t expected = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    for (std::uint32_t v = 0; v < sp.params()[i].values.size(); ++v) {
      if (v == c[i]) continue;
      auto n = c;
      n[i] = v;
      expected += sp.is_valid(n);
    }
  EXPECT_EQ(sp.neighbours(c, neighbourhood::hamming).size(), expected);
  // bx 16/64, by 1/4, shmem 1, algo b (c needs shmem): unordered parameters take any other value.
  EXPECT_EQ(sp.neighbours(c, neighbourhood::strictly_adjacent).size(), 6u);
}

TEST(space, encoding_and_keys) {
  const auto sp = small_space();
  EXPECT_EQ(sp.encoded_dimension(), 3u + 3u);  // three ordered + one-hot of three strings
  const auto e = sp.encode(config{3, 0, 1, 2});
  EXPECT_DOUBLE_EQ(e[0], 1.0);
  EXPECT_DOUBLE_EQ(e[1], 0.0);
  EXPECT_DOUBLE_EQ(e[2], 1.0);
  EXPECT_EQ((std::vector<double>(e.begin() + 3, e.end())), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(sp.key(config{3, 0, 1, 2}), "128,1,True,c");
  EXPECT_EQ(sp.describe(config{3, 0, 1, 2}), "{bx=128, by=1, shmem=True, algo='c'}");
  const auto c =
      sp.from_values({{"bx", value(64.0)}, {"by", value(2)}, {"shmem", value(true)}, {"algo", value("b")}});
  EXPECT_EQ(c, (config{2, 1, 1, 1}));
  EXPECT_THROW(
      sp.from_values({{"bx", value(65)}, {"by", value(2)}, {"shmem", value(1)}, {"algo", value("b")}}),
      error);
}

TEST(space, explicit_valid_set) {
  const auto sp = small_space().restricted_to({config{0, 3, 0, 0}, config{3, 0, 1, 2}, config{0, 3, 0, 0}});
  EXPECT_TRUE(sp.explicit_valid_set());
  EXPECT_EQ(sp.valid().size(), 2u);
  EXPECT_TRUE(sp.is_valid(config{3, 0, 1, 2}));
  EXPECT_FALSE(sp.is_valid(config{1, 1, 0, 0}));  // valid by the constraints, but not listed
}

search_space knobs(int count, std::vector<std::string> constraints = {}) {
  std::vector<param> ps;
  for (int i = 0; i < count; ++i)
    ps.push_back(make_param("k" + std::to_string(i), param_type::integer, {1, 2, 4, 8, 16}));
  return search_space(std::move(ps), std::move(constraints));
}

// Without constraints every combination is valid: the set is dense (nothing enumerated or stored), at
// any size up to 2^63, and in the same lexicographic order as an enumerated one.
TEST(space, an_unconstrained_space_is_valid_whole_without_enumerating) {
  const auto sp = knobs(13);  // 1.2e9 combinations: 9.8 GB as stored ranks
  const auto& vs = sp.valid();
  EXPECT_TRUE(vs.dense());
  EXPECT_TRUE(sp.enumerated());
  EXPECT_EQ(static_cast<double>(vs.size()), sp.cartesian_size());
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{5}, vs.size() / 3, vs.size() - 1}) {
    const auto c = vs.at(i);
    EXPECT_EQ(vs.index_of(c), i);
    EXPECT_EQ(vs.rank(i), vs.rank_of(c));
  }
  EXPECT_EQ(vs.at(5), (config{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_THROW(vs.at(vs.size()), std::out_of_range);
  EXPECT_EQ(sp.valid_if_enumerable(), nullptr);  // more than max_valid_configs()
  EXPECT_EQ(sp.valid_if_enumerable(2'000'000'000), &vs);
  // Dense and enumerated agree on a small space (a constraint that always holds forces enumeration).
  const auto dense = knobs(3), enumerated = knobs(3, {"k0 > 0"});
  ASSERT_EQ(dense.valid().size(), enumerated.valid().size());
  EXPECT_FALSE(enumerated.valid().dense());
  for (std::size_t i = 0; i < dense.valid().size(); ++i)
    EXPECT_EQ(dense.valid().at(i), enumerated.valid().at(i));
}

// A constrained space estimated to hold more than the limit is not enumerated to find out (seconds and
// 8 bytes a configuration); it is sampled instead. A small one is enumerated as before.
TEST(space, valid_if_enumerable_estimates_before_it_enumerates) {
  const auto big = knobs(12, {"k0 * k1 >= 1"});  // 2.4e8 combinations, all valid
  EXPECT_EQ(big.valid_if_enumerable(), nullptr);
  EXPECT_FALSE(big.enumerated());
  rng r(3);
  EXPECT_TRUE(big.is_valid(big.sample(r)));
  EXPECT_FALSE(big.enumerated());
  const auto half = knobs(4, {"k0 <= 4"});  // 3 of 5 values of k0: 375 of 625
  const auto* vs = half.valid_if_enumerable();
  ASSERT_NE(vs, nullptr);
  EXPECT_EQ(vs->size(), 375u);
  EXPECT_EQ(half.valid_if_enumerable(100), nullptr);  // enumerated, but larger than asked
}

TEST(space, hotspot_sized_enumeration) {
  // 37 x 6 x 10^4 x 2 combinations, with the hotspot constraints of benchmark_hub (its T1 file).
  std::vector<value> bx{1, 2, 4, 8, 16};
  for (int v = 32; v <= 1024; v += 32)
    bx.emplace_back(v);
  std::vector<value> ten;
  for (int i = 1; i <= 10; ++i)
    ten.emplace_back(i);
  std::vector<param> ps;
  ps.push_back(make_param("block_size_x", param_type::integer, bx));
  ps.push_back(make_param("block_size_y", param_type::integer, {1, 2, 4, 8, 16, 32}));
  ps.push_back(make_param("tile_size_x", param_type::integer, ten));
  ps.push_back(make_param("tile_size_y", param_type::integer, ten));
  ps.push_back(make_param("temporal_tiling_factor", param_type::integer, ten));
  ps.push_back(make_param("loop_unroll_factor_t", param_type::integer, ten));
  ps.push_back(make_param("sh_power", param_type::integer, {0, 1}));
  const search_space sp(
      std::move(ps), {"block_size_x*block_size_y>= 32", "temporal_tiling_factor % loop_unroll_factor_t == 0",
                      "block_size_x*block_size_y <= 1024",
                      "(block_size_x*tile_size_x+ temporal_tiling_factor * 2) * (block_size_y*tile_size_y+ "
                      "temporal_tiling_factor * 2) * (2+sh_power) * 4 <= 49152"});
  EXPECT_DOUBLE_EQ(sp.cartesian_size(), 4440000.0);
  EXPECT_EQ(sp.valid().size(), 82984u);
  rng r(1);
  for (int i = 0; i < 1000; ++i) {
    auto c = sp.sample_unconstrained(r);
    EXPECT_EQ(sp.is_valid(c), sp.check(c)) << sp.describe(c);
  }
}

}  // namespace
}  // namespace kf
