// mixt/helpers/fused_linear_cross_entropy.h — cross-entropy over a linear map's output,
// computed in chunks of rows so that the [rows, classes] logits never exist whole.
//
// Liger-Kernel's fused linear cross-entropy and llm.c's fused classifier do the same: each
// chunk's logits give its loss and, at once, its gradient (softmax - one-hot), which is
// turned into the gradients of the input, the weight and the bias before the next chunk.
// The backward pass only scales them. What stays alive is the size of the input and of the
// weight, not of the logits.
//
// Equal to at::cross_entropy_loss(at::linear(input, weight, bias), targets, {}, Mean,
// ignore_index, label_smoothing) up to float rounding (tests/sdk/helpers/fused_linear_cross_entropy_test.cpp
// holds it to 1e-6 in float32). The matrix products run in whatever dtype autocast gives
// at::linear; the log-softmax, the loss and the weight's gradient sum in float32.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace mixt {

struct FusedCrossEntropyOptions {
  std::int64_t ignore_index = -100;  // targets equal to it count for nothing, as in PyTorch
  double label_smoothing = 0.0;
  // Rows per chunk; empty: Liger-Kernel's rule, so many that a chunk's logits are about the
  // size of the input (ceil(classes / width) chunks, rows rounded up to a power of two), and
  // at least 256 (thinner chunks make the weight's gradient sums memory-bound).
  std::optional<std::int64_t> chunk_rows;
};

// input [*, width], weight [classes, width], bias [classes] or undefined, targets [*] int64:
// the mean loss over the targets not ignored, a float32 scalar, differentiable with respect
// to input, weight and bias.
at::Tensor fused_linear_cross_entropy(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                      const at::Tensor& targets, const FusedCrossEntropyOptions& options = {});

// The rows per chunk the rule above gives for `rows` rows, `classes` classes and `width`.
std::int64_t fused_cross_entropy_chunk_rows(std::int64_t rows, std::int64_t classes, std::int64_t width);

}  // namespace mixt
