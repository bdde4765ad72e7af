// examples/custom_precision's stochastic rounding (stochastic_rounding.h) on hand-checkable
// cases, and the MasterWeights::pairs() it walks. Between the bfloat16 neighbours 1 and
// 1 + 2^-7, x = 1 + 2^-9 lies a quarter of the way up: its float32 low 16 bits are 0x4000,
// so it rounds up exactly when the random bits are >= 0xC000, a quarter of them.
#include "../../examples/custom_precision/stochastic_rounding.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "mixt/helpers/master_weights.h"

namespace mixt {
namespace {

const float kQuarterUp = 1.0f + std::ldexp(1.0f, -9);
const float kUpper = 1.0f + std::ldexp(1.0f, -7);

TEST(StochasticRounding, RoundsUpExactlyWhenTheBitsCarryIntoBfloat16) {
  const at::Tensor x = at::full({4}, kQuarterUp);
  const at::Tensor bits = at::tensor({0, 0xBFFF, 0xC000, 0xFFFF}, at::kInt);
  const at::Tensor rounded = my_master::stochastic_round_to_bf16(x, bits).to(at::kFloat);
  EXPECT_TRUE(at::equal(rounded, at::tensor({1.0f, 1.0f, kUpper, kUpper})));
  // Negative values round away from zero the same way: the sign bit is not touched.
  EXPECT_TRUE(at::equal(my_master::stochastic_round_to_bf16(-x, bits).to(at::kFloat),
                        at::tensor({-1.0f, -1.0f, -kUpper, -kUpper})));
  // A value bfloat16 holds stays itself whatever the bits.
  EXPECT_TRUE(at::equal(my_master::stochastic_round_to_bf16(at::full({4}, kUpper), bits).to(at::kFloat),
                        at::full({4}, kUpper)));
}

TEST(StochasticRounding, IsUnbiasedOverManyDraws) {
  constexpr std::int64_t kDraws = 200000;
  const at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor x = at::full({kDraws}, kQuarterUp);
  const at::Tensor rounded =
      my_master::stochastic_round_to_bf16(x, my_master::random_rounding_bits(x, generator)).to(at::kFloat);
  const at::Tensor up = rounded.eq(kUpper);
  EXPECT_TRUE(at::logical_or(up, rounded.eq(1.0f)).all().item<bool>()) << "only the two neighbours";
  // Binomial(200000, 1/4): standard deviation 0.001 of the share; 5 of them allowed.
  EXPECT_NEAR(up.to(at::kDouble).mean().item<double>(), 0.25, 0.005);
  EXPECT_NEAR(rounded.to(at::kDouble).mean().item<double>(), kQuarterUp, 0.005 * std::ldexp(1.0, -7));
  // Round-to-nearest, for contrast, always gives 1.
  EXPECT_TRUE(x.to(at::kBFloat16).to(at::kFloat).eq(1.0f).all().item<bool>());
}

TEST(StochasticRounding, SameSeedSameBits) {
  const at::Tensor x = at::zeros({1000});
  const at::Tensor a = my_master::random_rounding_bits(x, at::make_generator<at::CPUGeneratorImpl>(3));
  const at::Tensor b = my_master::random_rounding_bits(x, at::make_generator<at::CPUGeneratorImpl>(3));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_GE(a.min().item<int>(), 0);
  EXPECT_LT(a.max().item<int>(), 1 << 16);
}

TEST(MasterWeights, PairsAreTheTrainableParametersWithTheirFloat32Masters) {
  torch::nn::Linear layer(3, 2);
  layer->bias.set_requires_grad(false);
  cast_model(*layer, at::kBFloat16, [](const std::string&) { return false; });
  MasterWeights masters;
  const auto made = masters.make(*layer);
  ASSERT_EQ(masters.pairs().size(), 1u);  // the frozen bias has no master
  const MasterWeights::Pair& pair = masters.pairs()[0];
  EXPECT_EQ(pair.name, "weight");
  EXPECT_TRUE(pair.parameter.is_same(layer->weight));
  EXPECT_TRUE(pair.master.is_same(made[0].second));  // what the optimizer steps
  EXPECT_EQ(pair.master.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(pair.master, layer->weight.to(at::kFloat)));
}

}  // namespace
}  // namespace mixt
