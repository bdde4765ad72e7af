// What `lora` and `dora` share on one adapted layer (PEFT's LoraLayer): lora_A and lora_B, the
// scaling alpha / rank, the dropout on the adapter's input, and the layer's module, whose
// training flag the dropout follows. lora_function.cpp and dora_function.cpp compute with it.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <memory>

#include "mixt/helpers/linear.h"

namespace mixt::adapters {

struct LowRank {
  torch::nn::Linear a{nullptr}, b{nullptr};
  double scaling = 1;
  double dropout = 0;
  const torch::nn::Module* owner = nullptr;
  // PEFT's get_delta_weight: (B @ A) * scaling, the update merged into the weight.
  at::Tensor delta_weight() const { return at::matmul(b->weight, a->weight) * scaling; }
};

// LoRA: base(x) + lora_B(lora_A(dropout(x))) * scaling. `base` is the LinearFunction the layer
// had (null: at::linear).
std::shared_ptr<LinearFunction> lora_function(std::shared_ptr<LinearFunction> base, LowRank low_rank);

// DoRA: the layer's output rescaled row by row to `magnitude` over the norm of the updated
// weight (the magnitude a parameter, the norm detached), as PEFT's DoraLinearVariant.
std::shared_ptr<LinearFunction> dora_function(std::shared_ptr<LinearFunction> base, LowRank low_rank,
                                              at::Tensor magnitude);

// PEFT's initial lora_magnitude_vector: the row norms of weight + delta (lora_B is zero then,
// so the base's own).
at::Tensor dora_magnitude(const at::Tensor& weight, const LowRank& low_rank);

// The merged weights (PEFT's merge_unsafe), written into `weight` in place.
void merge_lora(at::Tensor& weight, const LowRank& low_rank);
void merge_dora(at::Tensor& weight, const LowRank& low_rank, const at::Tensor& magnitude);

}  // namespace mixt::adapters
