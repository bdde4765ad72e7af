// mixt/torch_optimizer.h — adapts any torch::optim optimizer to mixt::Optimizer.
//
//   auto sgd = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1));
//   return std::make_unique<mixt::TorchOptimizer>(std::move(sgd));
//
// LibTorch's optimizers already follow PyTorch's update rules; an optimizer plugin maps
// its recipe options onto theirs and wraps the result with this.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>

#include "mixt/optimizer.h"

namespace mixt {

class TorchOptimizer : public Optimizer {
 public:
  explicit TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer)
      : optimizer_(std::move(optimizer)) {}

  void step() override { optimizer_->step(); }
  void zero_grad() override { optimizer_->zero_grad(/*set_to_none=*/true); }

  std::vector<at::Tensor> parameters() const override {
    std::vector<at::Tensor> all;
    for (const auto& group : optimizer_->param_groups()) {
      all.insert(all.end(), group.params().begin(), group.params().end());
    }
    return all;
  }

  double learning_rate() const override {
    return optimizer_->param_groups().front().options().get_lr();
  }
  void set_learning_rate(double lr) override {
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  }

  void save(torch::serialize::OutputArchive& archive) override { optimizer_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { optimizer_->load(archive); }

  torch::optim::Optimizer& torch_optimizer() { return *optimizer_; }

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// The parameters of a context, without their names.
inline std::vector<at::Tensor> parameters_of(const OptimizerContext& context) {
  std::vector<at::Tensor> params;
  for (const auto& [name, tensor] : context.named_parameters) params.push_back(tensor);
  return params;
}

// Parameter groups for a torch::optim optimizer. With `decay_1d` false, 1-D parameters
// (biases and normalisation scales/shifts) get a group of their own with weight decay 0,
// as NVIDIA's ResNet-50 recipe and most vision recipes do; everything else keeps
// `options`. Empty groups are left out.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> weight_decay_groups(const OptimizerContext& context,
                                                                   const Options& options, bool decay_1d) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (decay_1d || options.weight_decay() == 0.0) {
    groups.emplace_back(parameters_of(context), std::make_unique<Options>(options));
    return groups;
  }
  std::vector<at::Tensor> decayed, not_decayed;
  for (const auto& [name, tensor] : context.named_parameters) {
    (tensor.dim() <= 1 ? not_decayed : decayed).push_back(tensor);
  }
  if (!decayed.empty()) groups.emplace_back(std::move(decayed), std::make_unique<Options>(options));
  if (!not_decayed.empty()) {
    auto no_decay = std::make_unique<Options>(options);
    no_decay->weight_decay(0.0);
    groups.emplace_back(std::move(not_decayed), std::move(no_decay));
  }
  return groups;
}

}  // namespace mixt
