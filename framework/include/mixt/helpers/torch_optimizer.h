// mixt/helpers/torch_optimizer.h — adapts any torch::optim optimizer to mixt::Optimizer.
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

// The split a recipe's `weight_decay_1d: false` asks for: 1-D parameters (biases and
// normalisation scales/shifts) get no weight decay, as NVIDIA's ResNet-50 recipe and most
// vision recipes do; the others keep it. With `decay_1d` true everything is `decayed`.
struct WeightDecaySplit {
  std::vector<at::Tensor> decayed, not_decayed;
};
inline WeightDecaySplit split_for_weight_decay(const OptimizerContext& context, bool decay_1d) {
  WeightDecaySplit split;
  for (const auto& [name, tensor] : context.named_parameters) {
    (decay_1d || tensor.dim() > 1 ? split.decayed : split.not_decayed).push_back(tensor);
  }
  return split;
}

// Parameter groups for a torch::optim optimizer: `options` for the decayed parameters, the
// same with weight decay 0 for the others (split_for_weight_decay). Empty groups are left out.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> weight_decay_groups(const OptimizerContext& context,
                                                                   const Options& options, bool decay_1d) {
  WeightDecaySplit split = split_for_weight_decay(context, decay_1d || options.weight_decay() == 0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!split.decayed.empty()) groups.emplace_back(std::move(split.decayed), std::make_unique<Options>(options));
  if (!split.not_decayed.empty()) {
    auto no_decay = std::make_unique<Options>(options);
    no_decay->weight_decay(0.0);
    groups.emplace_back(std::move(split.not_decayed), std::move(no_decay));
  }
  return groups;
}

}  // namespace mixt
