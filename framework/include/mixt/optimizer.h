// mixt/optimizer.h — the optimizer interface.
//
// The trainer and precision policies drive an optimizer only through this: gradients are
// already in the parameters' .grad when step() is called (unscaled, if a policy scales).
#pragma once

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <string>
#include <utility>
#include <vector>

namespace mixt {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual void step() = 0;       // one update from the current gradients
  virtual void zero_grad() = 0;  // gradients set to none

  // A loss-scaled step decided on the device (torch.optim's _step_supports_amp_scaling with
  // optimizer.grad_scale / optimizer.found_inf): a loss scaler then hands the optimizer its
  // scale and found-inf flag instead of reading the flag on the host to choose between
  // step() and nothing. Optimizers that return true implement step_scaled().
  virtual bool can_step_scaled() const { return false; }
  // One step from gradients still multiplied by `grad_scale`, applied only if `found_inf`
  // is 0. Both are float32 scalars on the scaler's device (an optimizer with parameters on
  // other devices copies them there, without a host read):
  //   grad_scale  the loss scale: divide every gradient by it (and leave it divided, as
  //               step() would have seen it); undefined when the gradients are unscaled already.
  //   found_inf   0: apply the step; 1: skip it, leaving parameters and state (step counters
  //               included) exactly as if step_scaled() had not been called, and any later
  //               step as it would have been without this one.
  // Must not read found_inf on the host, except where the update cannot be written without it
  // (say so in the optimizer's documentation). The default throws mixt::Error.
  virtual void step_scaled(const at::Tensor& grad_scale, const at::Tensor& found_inf);
  // Every parameter the optimizer updates (what a scaler unscales, what clipping sees).
  virtual std::vector<at::Tensor> parameters() const = 0;

  // The base learning rate of every parameter group; schedulers set it each step.
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(double lr) = 0;

  // Optimizer state for checkpoints (momentum buffers, Adam moments, step counts).
  virtual void save(torch::serialize::OutputArchive& archive) = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

struct OptimizerContext {
  // The model's trainable parameters with their names ("layer1.0.conv1.weight"), so an
  // optimizer can form groups (e.g. no weight decay on biases and batch norm).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters;
};

}  // namespace mixt
