// mixt/model.h — the model interface.
//
// A model is a torch::nn::Module with one tensor in and one tensor out: a batch of the
// training data's samples, [batch, *ModelContext::sample_shape], in; logits,
// [batch, ModelContext::num_classes], out (mixt check holds a model to that with one blank
// batch). Its registered parameters and buffers are what checkpoints save and optimizers
// update, so name them as torchvision does when the model has a torchvision twin.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

namespace mixt {

class Model : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
};

// What a model factory may need besides its own options.
struct ModelContext {
  at::Device device = at::kCPU;
  std::vector<std::int64_t> sample_shape;  // e.g. {1, 28, 28}, from the training dataset
  std::int64_t num_classes = 0;            // from the training dataset; 0 when unknown
};

}  // namespace mixt
