// The global gradient norm and clipping by it, as torch.nn.utils.clip_grad_norm_ computes
// them (its foreach path, op for op), but kept on the device: LibTorch's C++
// clip_grad_norm_ returns a double, a host synchronisation every step.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace mixt {

// The 2-norm of all the gradients of `parameters` taken as one vector: a scalar on the
// first gradient's device (grouped by device and dtype as PyTorch groups them, so the same
// value bit for bit). Undefined when no parameter has a gradient.
at::Tensor gradient_norm(const std::vector<at::Tensor>& parameters);

// Scales the gradients by min(1, max_norm / (total_norm + 1e-6)), with no host read.
void clip_gradients(const std::vector<at::Tensor>& parameters, const at::Tensor& total_norm, double max_norm);

}  // namespace mixt
