// mixt/helpers/nf4.h — 4-bit NormalFloat weights (QLoRA, Dettmers et al. 2023) as torchao's
// NF4Tensor holds and computes them (torchao 0.18, nf4_tensor.py: to_nf4, linear_nf4), for
// a frozen base linear layer that keeps 0.53 bytes per weight instead of 2 or 4.
//
// Over the flattened weight, in blocks of 64 (block_size): each weight divided by its
// block's absolute maximum, stored as the index of the nearest of the 16 NF4 values, two
// indices a byte (the first in the high nibble). The blocks' maxima are quantised again
// (double quantisation): their mean subtracted, then in groups of 256 (scaler_block_size)
// scaled by 256 / (2 * the group's absolute maximum), rounded to int8. Every step in the
// weight's dtype, with torchao's operations, so that codes, scales and the dequantised
// weight equal torchao's bit for bit.
//
// torchao requires the number of blocks to be a multiple of 256 (numel a multiple of
// 16,384); mixt lets the last group of scales be shorter (as bitsandbytes' nested
// quantisation does), which on every shape torchao takes is torchao's arithmetic: SmolLM2's
// 576-wide projections have 5,184 blocks. The weight's size must be a multiple of 64.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "mixt/helpers/linear.h"

namespace mixt {

struct Nf4Weight {
  at::Tensor codes;    // uint8 [numel / 2]: two 4-bit indices into lut a byte, the first high
  at::Tensor scalers;  // int8 [numel / block_size]: each block's quantised absmax minus mean
  at::Tensor factors;  // dtype [ceil(blocks / scaler_block_size)]: each group's 256 / (2 absmax)
  at::Tensor mean;     // dtype scalar: the mean of the blocks' absmax
  at::Tensor lut;      // dtype [16]: the NF4 values, in the weight's dtype (torchao's `nf4`)
  std::vector<std::int64_t> sizes;
  std::int64_t block_size = 64, scaler_block_size = 256;
  at::ScalarType dtype = at::kFloat;

  std::int64_t bytes() const;  // what it holds, in bytes
};

// The NF4 values (QLoRA's Appendix E, rounded to 4 decimals as torchao and bitsandbytes).
inline constexpr float kNf4Values[16] = {-1.0f,   -0.6962f, -0.5251f, -0.3949f, -0.2844f, -0.1848f, -0.0911f, 0.0f,
                                         0.0796f, 0.1609f,  0.2461f,  0.3379f,  0.4407f,  0.5626f,  0.7230f,  1.0f};

// torchao's to_nf4(weight, block_size, scaler_block_size). Throws std::invalid_argument
// when weight.numel() is not a multiple of block_size (or odd) or weight is not floating.
Nf4Weight nf4_quantize(const at::Tensor& weight, std::int64_t block_size = 64, std::int64_t scaler_block_size = 256);

// torchao's NF4Tensor.get_original_weight(): the weight in its dtype.
at::Tensor nf4_dequantize(const Nf4Weight& weight);

// torchao's linear_nf4(input, weight): input @ dequantize(weight).to(input.dtype)^T, whose
// backward gives the input's gradient alone (grad_output @ dequantize(weight), dequantised
// again rather than kept: the forward saves nothing of the weight but the NF4 data).
at::Tensor nf4_linear(const at::Tensor& input, const std::shared_ptr<const Nf4Weight>& weight);

// A frozen linear layer computed from its NF4 weight: nf4_linear plus the bias (torchao's
// F.linear over an NF4Tensor), or, when a function was installed before it (a float8
// policy's), that function called with the dequantised weight (no gradient).
class Nf4LinearFunction : public LinearFunction {
 public:
  Nf4LinearFunction(std::shared_ptr<const Nf4Weight> weight, std::shared_ptr<LinearFunction> previous)
      : weight_(std::move(weight)), previous_(std::move(previous)) {}
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override;
  const Nf4Weight& weight() const { return *weight_; }

 private:
  std::shared_ptr<const Nf4Weight> weight_;
  std::shared_ptr<LinearFunction> previous_;
};

// Quantises a mixt::Linear layer's weight to NF4 and installs an Nf4LinearFunction over the
// function already there. The weight parameter keeps its name, shape, dtype and device but
// is set to one element repeated (stride 0): its float storage is freed, checkpoints hold a
// single number for it, and an adapter still reads the layer's sizes from it. The weight
// must not require a gradient. Returns the bytes freed (the float weight's).
std::int64_t quantize_linear_nf4(const LinearLayer& layer);

// The layer's weight as its forward uses it: dequantised (in the weight's dtype, no gradient)
// when quantize_linear_nf4 holds it in NF4, else layer.weight. For an adapter that reads
// the base weight's values (DoRA's column norms), in its apply(), before it wraps the layer.
at::Tensor base_weight(const LinearLayer& layer);

// Whether `weight` is what quantize_linear_nf4 left of a weight: one element repeated over
// its shape. Its values are not the layer's (loading or exporting it means nothing).
bool held_in_nf4(const at::Tensor& weight);

}  // namespace mixt
