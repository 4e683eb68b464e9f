// Alignment inputs of the GP (bayesian's and hybrid's alignment_features): which parameters get one
// (power_of_two_params), what the input holds, and that it lets the model tell power-of-two sizes from
// their neighbours by index where the plain encoding cannot.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kforge/kforge.hpp"
#include "kforge/strategies/bayesian.hpp"
#include "kforge/strategies/common.hpp"

namespace kf {
namespace {

using strategies::bayesian;
using strategies::bayesian_options;
using strategies::is_power_of_two;
using strategies::power_of_two_params;

std::vector<value> ints(std::initializer_list<int> xs) {
  std::vector<value> v;
  for (int x : xs)
    v.emplace_back(x);
  return v;
}

// block: sizes 16..256 step 16 (powers of two and others); tile: 1..4 (3 is not one); unroll: all powers
// of two; method: a selector with 0; vec: two values; name: strings.
search_space mixed_space() {
  std::vector<param> ps;
  std::vector<value> block;
  for (int b = 16; b <= 256; b += 16)
    block.emplace_back(b);
  ps.push_back(make_param("block", param_type::integer, block));
  ps.push_back(make_param("tile", param_type::integer, ints({1, 2, 3, 4})));
  ps.push_back(make_param("unroll", param_type::integer, ints({1, 2, 4, 8})));
  ps.push_back(make_param("method", param_type::integer, ints({0, 1, 2, 3})));
  ps.push_back(make_param("vec", param_type::integer, ints({1, 3})));
  ps.push_back(make_param("name", param_type::string, {value("a"), value("b"), value("c")}));
  ps.back().ordered = false;
  return search_space(std::move(ps), {});
}

TEST(AlignmentFeatures, PowersOfTwo) {
  for (int x : {1, 2, 4, 64, 1 << 20})
    EXPECT_TRUE(is_power_of_two(value(x))) << x;
  for (int x : {0, -2, 3, 48, 96, 255})
    EXPECT_FALSE(is_power_of_two(value(x))) << x;
  EXPECT_FALSE(is_power_of_two(value(2.0)));
  EXPECT_FALSE(is_power_of_two(value("4")));
}

TEST(AlignmentFeatures, OnlySizesThatMixPowersOfTwoWithOtherValues) {
  const auto space = mixed_space();
  // block and tile; not unroll (all powers of two), method (0 is no size), vec (two values), name.
  EXPECT_EQ(power_of_two_params(space), (std::vector<std::size_t>{0, 1}));
}

TEST(AlignmentFeatures, TheModelSeesOneZeroOneInputPerAlignedParameter) {
  const auto space = mixed_space();
  bayesian_options on;
  on.alignment_features = true;
  bayesian with(on), without;
  with.initialize(space, 1);
  without.initialize(space, 1);
  ASSERT_EQ(without.input_dimension(), space.encoded_dimension());
  ASSERT_EQ(with.input_dimension(), space.encoded_dimension() + 2);
  const config c{2, 2, 0, 0, 0, 0};  // block 48, tile 3
  const config d{3, 1, 0, 0, 0, 0};  // block 64, tile 2
  const auto pd = static_cast<Eigen::Index>(space.encoded_dimension());
  const auto ec = with.encode(c), ed = with.encode(d);
  EXPECT_EQ(ec.head(pd), without.encode(c));  // the space's encoding comes first, unchanged
  EXPECT_EQ(ec(pd), 0.0);
  EXPECT_EQ(ec(pd + 1), 0.0);
  EXPECT_EQ(ed(pd), 1.0);
  EXPECT_EQ(ed(pd + 1), 1.0);
}

// A space like benchmark_hub's convolution without shared memory: block widths that are powers of two
// are fast, the others between them slow. After the same observations, the model with alignment inputs
// predicts an unseen power of two fast and an unseen other width slow; the plain model, which sees
// only the index, cannot separate them.
TEST(AlignmentFeatures, LetTheModelSeparatePowersOfTwoFromTheirNeighbours) {
  std::vector<param> ps;
  std::vector<value> block;
  for (int b = 16; b <= 256; b += 16)
    block.emplace_back(b);
  ps.push_back(make_param("block", param_type::integer, block));
  ps.push_back(make_param("tile", param_type::integer, ints({1, 2, 4, 8})));
  const search_space space(std::move(ps), {});
  auto time_of = [&](const config& c) {
    const double base = is_power_of_two(space.value_of(c, 0)) ? 1.0 : 4.0;
    return base * (1.0 + 0.05 * c[1]);
  };
  auto predicted = [&](bool features, const config& c) {
    bayesian_options o;
    o.alignment_features = features;
    o.initial_samples = 1;
    bayesian b(o);
    b.initialize(space, 3);
    const run_history history;
    const search_state s(space, history, {}, std::nullopt);
    std::vector<trial> seen;
    // Every tile of block 16, 32, 48, 80, 96, 128, 160, 256 (index 0, 1, 2, 4, 5, 7, 9, 15).
    for (std::uint32_t bi : {0u, 1u, 2u, 4u, 5u, 7u, 9u, 15u})
      for (std::uint32_t t = 0; t < 4; ++t) {
        trial tr;
        tr.cfg = {bi, t};
        tr.st = status::ok;
        tr.time_ms = time_of(tr.cfg);
        seen.push_back(tr);
      }
    b.observe(s, seen);
    b.update_model();
    Eigen::MatrixXd x(1, static_cast<Eigen::Index>(b.input_dimension()));
    x.row(0) = b.encode(c).transpose();
    Eigen::VectorXd mean(1), var(1);
    b.model()->predict(x, mean, var);
    return std::exp(mean(0));
  };
  const config pow2{3, 1};   // block 64: between 48 (slow) and 80 (slow)
  const config other{6, 1};  // block 112: between 96 (slow) and 128 (fast)
  EXPECT_LT(predicted(true, pow2), 0.75 * predicted(true, other));
  EXPECT_LT(predicted(true, pow2), 2.0);
  EXPECT_GT(predicted(true, other), 2.5);
  // Without: 64 sits between two slow neighbours and is predicted slow.
  EXPECT_GT(predicted(false, pow2), 2.0);
}

}  // namespace
}  // namespace kf
