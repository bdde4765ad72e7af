// mixt/helpers/nf4.h against torchao 0.18's NF4Tensor (tests/golden/make_qlora_golden.py, the
// qlora_golden fixture): to_nf4's codes, int8 scales, group factors and mean, and the
// dequantised weight, in float32 and bfloat16, bit for bit; mixt's shorter last group of
// scales against torchao's formulas written out over it; linear_nf4's output and input
// gradient in float32, bfloat16 and float32 under autocast(bfloat16), bit for bit (the
// same dequantised weight, the same ATen matmuls); a quantised layer's float weight freed.
#include "mixt/helpers/nf4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <map>
#include <string>

#include "mixt/autocast.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/safetensors.h"
#include "test_support.h"

namespace mixt {
namespace {

const fs::path kGolden = MIXT_QLORA_GOLDEN_DIR;

std::map<std::string, at::Tensor> golden(const std::string& file) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, tensor] : load_safetensors(kGolden / file).tensors) out[name] = tensor;
  return out;
}

// Equal bit for bit (NaN nowhere expected): same dtype, shape and values.
void expect_bitwise(const at::Tensor& got, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(got.scalar_type(), expected.scalar_type()) << what;
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::equal(got, expected)) << what << ": largest difference "
                                        << (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
}

class Nf4Quantisation : public ::testing::TestWithParam<std::string> {};

TEST_P(Nf4Quantisation, EqualsTorchaosToNf4BitForBit) {
  const std::string p = GetParam();
  auto g = golden("nf4.safetensors");
  const Nf4Weight w = nf4_quantize(g[p + "_weight"], 64, 256);
  expect_bitwise(w.codes, g[p + "_codes"], "codes");
  expect_bitwise(w.scalers, g[p + "_scalers"], "int8 scales");
  expect_bitwise(w.factors, g[p + "_factors"], "group factors");
  expect_bitwise(w.mean.reshape({1}), g[p + "_mean"], "mean of the block maxima");
  expect_bitwise(nf4_dequantize(w), g[p + "_dequantized"], "dequantised weight");
  // The codes use all 16 values and the quantisation is not the identity.
  EXPECT_EQ(std::get<0>(at::_unique(w.codes.bitwise_right_shift(4))).numel(), 16);
  EXPECT_FALSE(at::equal(nf4_dequantize(w), g[p + "_weight"]));
  // 4 bits a weight, 1 byte a block of 64, the group factors, the mean and the 16 values.
  const std::int64_t n = g[p + "_weight"].numel(), size = g[p + "_weight"].element_size();
  EXPECT_EQ(w.bytes(), n / 2 + n / 64 + (w.factors.numel() + 1 + 16) * size);
}

INSTANTIATE_TEST_SUITE_P(Torchao, Nf4Quantisation, ::testing::Values("f32", "bf16", "short", "smol"),
                         [](const auto& info) { return info.param; });

class Nf4Linear : public ::testing::TestWithParam<std::string> {};

TEST_P(Nf4Linear, ForwardAndInputGradientEqualTorchaosLinearNf4) {
  const std::string p = GetParam();
  auto g = golden("linear.safetensors");
  auto weight = std::make_shared<const Nf4Weight>(nf4_quantize(g[p + "_weight"]));
  const at::Tensor x = g[p + "_input"].clone().requires_grad_(true);
  at::Tensor y;
  {
    const AutocastScope scope(at::kCPU, at::kBFloat16, /*enabled=*/p == "amp");
    y = nf4_linear(x, weight);
  }
  expect_bitwise(y, g[p + "_output"], "output");
  y.backward(g[p + "_grad_output"]);
  expect_bitwise(x.grad(), g[p + "_grad_input"], "input gradient");
}

INSTANTIATE_TEST_SUITE_P(Torchao, Nf4Linear, ::testing::Values("f32", "bf16", "amp"),
                         [](const auto& info) { return info.param; });

// A mixt::Linear whose weight is held in NF4: the float storage gone (one element left, the
// shape kept), the forward and the input gradient linear_nf4's, no gradient for the weight.
TEST(Nf4Layer, FreesTheFloatWeightAndComputesLinearNf4) {
  auto g = golden("linear.safetensors");
  Linear layer(torch::nn::LinearOptions(128, 256).bias(false));
  {
    at::NoGradGuard no_grad;
    layer->weight.copy_(g["f32_weight"]);
  }
  layer->weight.requires_grad_(false);
  const std::vector<LinearLayer> layers = linear_layers(*layer);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(quantize_linear_nf4(layers[0]), 256 * 128 * 4);
  EXPECT_EQ(layer->weight.storage().nbytes(), 4u);
  EXPECT_EQ(layer->weight.sizes(), (std::vector<std::int64_t>{256, 128}));
  EXPECT_EQ(layer->named_parameters()["weight"].storage().nbytes(), 4u);  // the registered parameter itself
  EXPECT_TRUE(held_in_nf4(layer->weight));
  EXPECT_FALSE(held_in_nf4(g["f32_weight"]));
  // What an adapter that reads the base's values (DoRA) gets: torchao's dequantised weight.
  const at::Tensor dequantized = base_weight(linear_layers(*layer)[0]);
  expect_bitwise(dequantized, nf4_dequantize(nf4_quantize(g["f32_weight"])), "base_weight");
  const at::Tensor x = g["f32_input"].clone().requires_grad_(true);
  const at::Tensor y = layer->forward(x);
  expect_bitwise(y, g["f32_output"], "output");
  y.backward(g["f32_grad_output"]);
  expect_bitwise(x.grad(), g["f32_grad_input"], "input gradient");
  EXPECT_FALSE(layer->weight.grad().defined());
}

TEST(Nf4Layer, RefusesAWeightThatIsNotWholeBlocksOrIsTrained) {
  EXPECT_THROW(nf4_quantize(at::randn({3, 50})), std::invalid_argument);
  Linear trained(torch::nn::LinearOptions(64, 64));
  try {
    quantize_linear_nf4(linear_layers(*trained)[0]);
    FAIL() << "a trained weight was quantised";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("only a frozen weight is held in NF4"));
  }
  try {
    nf4_quantize(at::randn({3, 50}));
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("[3, 50] (150 values) is not a whole number of NF4 blocks of 64"));
  }
}

}  // namespace
}  // namespace mixt
