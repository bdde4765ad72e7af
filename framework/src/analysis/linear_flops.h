// Model analysis: what a model's linear layers (mixt/helpers/linear.h) compute in one
// forward pass, and how much of it the precision policy computes its own way (float8 under
// the fp8_* policies). `mixt check` prints it.
#pragma once

#include <torch/nn/module.h>

#include <cstddef>
#include <functional>

namespace mixt {

struct LinearFlops {
  std::size_t layers = 0;         // the model's linear maps
  std::size_t policy_layers = 0;  // those with a LinearFunction installed (the policy's)
  double flops = 0.0;             // of every linear map: 2 x rows x in x out per call
  double policy_flops = 0.0;      // of those the policy computes
};

// Counts while `forward` runs the model once: each linear map's function is wrapped in a
// counter for the pass, and what was installed (or at::linear) still computes the result,
// then is put back as it was.
LinearFlops count_linear_flops(torch::nn::Module& model, const std::function<void()>& forward);

}  // namespace mixt
