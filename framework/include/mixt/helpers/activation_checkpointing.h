// mixt/helpers/activation_checkpointing.h — trade compute for memory: keep a block's input,
// drop what its forward computes inside, and run that forward again in the backward pass
// (Chen et al. 2016; Python's torch.utils.checkpoint, which LibTorch lacks).
//
// Models get it from the recipe (`trainer.activation_checkpointing: all | [names]`) through
// mixt::call_block / mixt::call_submodule (mixt/helpers/fp32_modules.h), with no code of
// their own. recompute_in_backward() is the primitive underneath, for a model's own use:
//
//   at::Tensor forward(const at::Tensor& x) override {
//     // Each call to `body` keeps only its input alive; it runs again during backward().
//     return mixt::recompute_in_backward([this](const at::Tensor& in) { return body_->forward(in); }, x);
//   }
//
// The recomputed forward is the forward that ran: the CPU generator (and the input device's
// generator) are set back to their state at the first run and restored afterwards, so
// dropout and stochastic depth draw the same masks and the run's random sequence is the
// same as without recomputation; the autocast state of the first run (enabled, dtype, cache)
// is re-entered; mixt::BatchNorm layers see recomputing() and leave their running
// statistics alone the second time. Parameters reached by the callable get their gradients
// as without it (and their post-accumulate hooks fire once).
//
// The callable is kept until the backward pass: capture members or values, never a
// reference to a local of the calling forward. It must compute the same function when
// called again (no state of its own that the first call changes). Not supported:
// torch::autograd::grad() through a recomputed block (it accumulates into .grad as
// backward() does) and double backward.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mixt {

using BlockForward = std::function<at::Tensor(const at::Tensor&)>;

// forward(input), whose intermediate tensors are freed at once and recomputed by the
// backward pass. Under no_grad (evaluation) it is the plain call.
at::Tensor recompute_in_backward(BlockForward forward, const at::Tensor& input);

// True while a backward pass recomputes a block's forward on this thread: a layer with
// side effects in its forward (batch norm's running statistics) skips them then.
bool recomputing();

// The recipe's choice for `model`, set by the framework: every block the model routes with
// call_block (`all`), or the submodules named (any name the model routes).
struct ActivationCheckpointing {
  bool all_blocks = false;
  std::vector<std::string> names;
  bool enabled() const { return all_blocks || !names.empty(); }
};
void set_activation_checkpointing(const torch::nn::Module& model, ActivationCheckpointing choice);
// Whether the routed call `name` (a block when `block`) recomputes; records that the model
// routes it.
bool checkpoints_activations(const torch::nn::Module& model, std::string_view name, bool block);
// The routed names that have recomputed so far, in routing order.
std::vector<std::string> checkpointed_submodules(const torch::nn::Module& model);
// The listed names the model has not routed so far.
std::vector<std::string> unrouted_checkpointed_submodules(const torch::nn::Module& model);

}  // namespace mixt
