// mixt/helpers/batch_norm.h — batch-norm layers that a data-parallel run can synchronise
// (`trainer.distributed.sync_batchnorm: true`, the counterpart of torch.nn.SyncBatchNorm).
//
// mixt::BatchNorm1d/2d/3d are torch::nn::BatchNorm1d/2d/3d — same options, parameters,
// buffers and state_dict names, same forward — plus one thing: when the framework attaches
// the run's Communicator, a training-mode forward normalises with the mean and variance of
// the *global* batch (every rank's samples), updates the running statistics with them, and
// its backward all-reduces the two per-channel gradient sums the input gradient needs.
// Nothing changes in evaluation mode, in a single process, or without sync_batchnorm.
// A forward recomputed by activation checkpointing leaves the running statistics as the
// first run left them (mixt/helpers/activation_checkpointing.h).
//
// Why a subclass and not a module swap as in Python: a LibTorch model calls its layers
// through typed members (`bn1_->forward(x)`), so the framework cannot replace a layer after
// construction. A model opts in by constructing mixt::BatchNorm2d where it would construct
// torch::nn::BatchNorm2d; every model of mixt's zoo does. With sync_batchnorm on, a model
// that still holds torch::nn batch-norm layers is a recipe error naming them.
//
//   bn1_ = register_module("bn1", mixt::BatchNorm2d(64));   // was torch::nn::BatchNorm2d(64)
//
// The collectives run on the module's forward and backward, so every rank must run the same
// layers in the same order (true for data parallelism: one model, the same graph).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <optional>

#include "mixt/distributed.h"
#include "mixt/helpers/activation_checkpointing.h"

namespace mixt {

// What the framework sees of a synchronisable layer.
class SynchronisedBatchNorm {
 public:
  virtual ~SynchronisedBatchNorm() = default;
  // The process group to take statistics over; null (the default) normalises with this
  // rank's batch alone. The communicator must outlive every forward and backward.
  void synchronise_over(const Communicator* communicator) { communicator_ = communicator; }
  const Communicator* communicator() const { return communicator_; }

 protected:
  // True when this forward must take global statistics: training, a communicator of more
  // than one rank.
  bool synchronises(bool training) const { return training && communicator_ && communicator_->world_size() > 1; }

 private:
  const Communicator* communicator_ = nullptr;
};

// Batch norm over the global batch: statistics per channel (dim 1) over every other
// dimension of every rank's `input`, combined by one all-reduce (counts may differ per rank,
// a rank may hold zero samples). `running_mean`/`running_var` (when defined) are updated in
// place with `exponential_average_factor`, the variance unbiased by the global count, as
// torch.nn.SyncBatchNorm does. Differentiable in `input`, `weight` and `bias`; `weight` and
// `bias` receive this rank's share of the gradient (the data-parallel gradient average then
// completes it), `input` the exact gradient of the sum of all ranks' losses.
// The output has `input`'s dtype and memory format; statistics are computed in float32.
at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var,
                           double exponential_average_factor, double eps, const Communicator& communicator);

namespace detail {
// The forward of torch::nn::BatchNormImplBase::forward with sync_batch_norm in place of
// torch::batch_norm (same momentum and num_batches_tracked handling).
template <class Base>
at::Tensor synchronised_forward(Base& layer, const Communicator& communicator, const at::Tensor& input) {
  double factor = 0.0;
  if (layer.options.track_running_stats()) {
    layer.num_batches_tracked += 1;
    factor = layer.options.momentum().has_value()
                 ? *layer.options.momentum()
                 : 1.0 / static_cast<double>(layer.num_batches_tracked.template item<std::int64_t>());
  }
  return sync_batch_norm(input, layer.weight, layer.bias, layer.running_mean, layer.running_var, factor,
                         layer.options.eps(), communicator);
}

// A training-mode forward run again by activation checkpointing: the output depends on the
// batch's statistics alone, and the running ones were updated when it first ran. The same
// kernels as that run, updating copies of the running statistics that are then dropped
// (torch.utils.checkpoint updates them twice).
template <class Base>
at::Tensor recomputed_forward(Base& layer, const Communicator* communicator, const at::Tensor& input) {
  const auto scratch = [](const at::Tensor& t) { return t.defined() ? t.clone() : t; };
  const double factor = layer.options.momentum().value_or(0.0);
  if (communicator) {
    return sync_batch_norm(input, layer.weight, layer.bias, scratch(layer.running_mean), scratch(layer.running_var),
                           factor, layer.options.eps(), *communicator);
  }
  return torch::nn::functional::detail::batch_norm(input, scratch(layer.running_mean), scratch(layer.running_var),
                                                   layer.weight, layer.bias, /*training=*/true, factor,
                                                   layer.options.eps());
}
}  // namespace detail

// clone() is overridden because torch's (Cloneable<torch::nn::BatchNorm2dImpl>) copies as
// the torch class: the copy would lose the ability to synchronise. The override deep-copies
// through torch's clone and rewraps the result, keeping the communicator.
#define MIXT_SYNCHRONISED_BATCH_NORM(D)                                                                    \
  class BatchNorm##D##dImpl : public torch::nn::BatchNorm##D##dImpl, public SynchronisedBatchNorm {      \
   public:                                                                                                 \
    using torch::nn::BatchNorm##D##dImpl::BatchNorm##D##dImpl;                                             \
    /* Takes over `layer`'s parameters and buffers (shares them, as a copy of a module does). */         \
    explicit BatchNorm##D##dImpl(const torch::nn::BatchNorm##D##dImpl& layer)                             \
        : torch::nn::BatchNorm##D##dImpl(layer) {}                                                         \
    std::shared_ptr<torch::nn::Module> clone(                                                              \
        const std::optional<at::Device>& device = std::nullopt) const override {                          \
      const auto copied = std::dynamic_pointer_cast<torch::nn::BatchNorm##D##dImpl>(                     \
          torch::nn::BatchNorm##D##dImpl::clone(device));                                                  \
      auto copy = std::make_shared<BatchNorm##D##dImpl>(*copied);                                          \
      copy->synchronise_over(communicator());                                                             \
      return copy;                                                                                         \
    }                                                                                                      \
    at::Tensor forward(const at::Tensor& input) {                                                          \
      if (is_training() && recomputing()) {                                                                \
        _check_input_dim(input);                                                                           \
        return detail::recomputed_forward(*this, synchronises(true) ? communicator() : nullptr, input);    \
      }                                                                                                    \
      if (!synchronises(is_training())) return torch::nn::BatchNorm##D##dImpl::forward(input);             \
      _check_input_dim(input);                                                                             \
      return detail::synchronised_forward(*this, *communicator(), input);                                  \
    }                                                                                                      \
  };                                                                                                       \
  TORCH_MODULE(BatchNorm##D##d)

MIXT_SYNCHRONISED_BATCH_NORM(1);
MIXT_SYNCHRONISED_BATCH_NORM(2);
MIXT_SYNCHRONISED_BATCH_NORM(3);
#undef MIXT_SYNCHRONISED_BATCH_NORM

}  // namespace mixt
