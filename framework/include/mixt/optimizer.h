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
