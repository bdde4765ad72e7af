// mixt::fused_linear_cross_entropy against PyTorch's own arithmetic: the loss and the
// gradients autograd gives for at::cross_entropy_loss(at::linear(x, W, b), t) (mean over the
// targets not ignored, with and without label smoothing), within 1e-6 relative in float32,
// over chunks that do not divide the rows; and under bfloat16 autocast, where both compute
// the map in bfloat16, to bfloat16's precision.
#include "mixt/helpers/fused_linear_cross_entropy.h"

#include <gtest/gtest.h>

#include "mixt/autocast.h"

namespace mixt {
namespace {

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() /
         std::max(expected.abs().max().item<double>(), 1e-12);
}

struct Case {
  bool bias;
  double label_smoothing;
  std::optional<std::int64_t> chunk_rows;
};

struct Result {
  at::Tensor loss, grad_input, grad_weight, grad_bias;
};

struct Problem {
  at::Tensor input, weight, bias, targets;
  Problem(std::int64_t rows, std::int64_t width, std::int64_t classes, bool with_bias) {
    at::manual_seed(7);
    input = at::randn({rows / 3, 3, width}) * 2;  // a [batch, time, width] input
    weight = at::randn({classes, width}) * 0.3;
    if (with_bias) bias = at::randn({classes});
    targets = at::randint(0, classes, {rows / 3, 3}, at::kLong);
    targets.index_put_({0, 1}, -100);  // ignored positions (padding)
    targets.index_put_({2, 0}, -100);
  }
  // `frozen_head`: the weight and bias need no gradient (an adapter's run).
  Result run(bool fused, const Case& c, bool frozen_head = false) const {
    const auto leaf = [](const at::Tensor& t, bool trained = true) { return t.clone().requires_grad_(trained); };
    const at::Tensor x = leaf(input), w = leaf(weight, !frozen_head);
    const at::Tensor b = bias.defined() ? leaf(bias, !frozen_head) : at::Tensor();
    at::Tensor loss;
    if (fused) {
      FusedCrossEntropyOptions o;
      o.label_smoothing = c.label_smoothing;
      o.chunk_rows = c.chunk_rows;
      loss = fused_linear_cross_entropy(x, w, b, targets, o);
    } else {
      const at::Tensor logits = at::linear(x, w, b);
      loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(at::kFloat), targets.reshape({-1}), {},
                                    at::Reduction::Mean, -100, c.label_smoothing);
    }
    (loss * 3.0).backward();  // a scale on the way back, as a loss scaler or accumulation gives
    return {loss.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : at::Tensor()};
  }
};

class FusedLinearCrossEntropy : public ::testing::TestWithParam<Case> {};

TEST_P(FusedLinearCrossEntropy, EqualsTheCrossEntropyOfTheLinearMapWithinFloatRounding) {
  const Case c = GetParam();
  const Problem p(/*rows=*/63, /*width=*/24, /*classes=*/257, c.bias);
  const Result plain = p.run(false, c), fused = p.run(true, c);
  EXPECT_EQ(fused.loss.scalar_type(), at::kFloat);
  EXPECT_LE(relative_error(fused.loss, plain.loss), 1e-6)
      << fused.loss.item<double>() << " vs " << plain.loss.item<double>();
  EXPECT_LE(relative_error(fused.grad_input, plain.grad_input), 1e-6);
  EXPECT_LE(relative_error(fused.grad_weight, plain.grad_weight), 1e-6);
  if (c.bias) {
    EXPECT_LE(relative_error(fused.grad_bias, plain.grad_bias), 1e-6);
  }
  // Ignored positions get no gradient at all.
  EXPECT_EQ(fused.grad_input[0][1].abs().max().item<float>(), 0.0f);
}

// A frozen head (an adapter's run): no gradient for it, and the input's the same bits as
// with the head trained.
TEST_P(FusedLinearCrossEntropy, AFrozenHeadGetsNoGradientAndTheInputTheSame) {
  const Case c = GetParam();
  const Problem p(/*rows=*/63, /*width=*/24, /*classes=*/257, c.bias);
  const Result trained = p.run(true, c), frozen = p.run(true, c, /*frozen_head=*/true);
  const Result plain = p.run(false, c, /*frozen_head=*/true);
  EXPECT_FALSE(frozen.grad_weight.defined());
  EXPECT_FALSE(plain.grad_weight.defined());
  EXPECT_FALSE(frozen.grad_bias.defined());
  EXPECT_TRUE(at::equal(frozen.loss, trained.loss));
  EXPECT_TRUE(at::equal(frozen.grad_input, trained.grad_input));
  EXPECT_LE(relative_error(frozen.grad_input, plain.grad_input), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedLinearCrossEntropy,
                         ::testing::Values(Case{false, 0.0, std::nullopt}, Case{false, 0.0, 8}, Case{true, 0.0, 5},
                                           Case{true, 0.1, 8}, Case{false, 0.1, 1000}));

TEST(FusedLinearCrossEntropyRule, ChunksAreLigerKernelsSize) {
  // ceil(128256 / 2048) = 63 chunks of 65536 rows: ceil(65536 / 63) = 1041, rounded up to 2048.
  EXPECT_EQ(fused_cross_entropy_chunk_rows(65536, 128256, 2048), 2048);
  // ceil(50257 / 768) = 66 chunks of 32768 rows: 497, rounded up to 512.
  EXPECT_EQ(fused_cross_entropy_chunk_rows(32768, 50257, 768), 512);
  // Fewer rows: the floor of 256 (1024 / 66 would be 16).
  EXPECT_EQ(fused_cross_entropy_chunk_rows(1024, 50257, 768), 256);
  EXPECT_EQ(fused_cross_entropy_chunk_rows(5, 10, 64), 256);
}

// Under bfloat16 autocast the map runs in bfloat16 in both (autocast's at::linear), the
// softmax in float32: they agree to bfloat16's rounding of the logits.
TEST(FusedLinearCrossEntropyAutocast, ComputesTheMapInAutocastsDtype) {
  const Problem p(60, 32, 101, false);
  Result plain, fused;
  {
    AutocastScope bf16(at::kCPU, at::kBFloat16);
    plain = p.run(false, {});
    fused = p.run(true, {});
  }
  EXPECT_LE(relative_error(fused.loss, plain.loss), 1e-5);
  EXPECT_LE(relative_error(fused.grad_weight, plain.grad_weight), 2e-2);
  EXPECT_LE(relative_error(fused.grad_input, plain.grad_input), 2e-2);
  EXPECT_EQ(fused.grad_weight.scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace mixt
