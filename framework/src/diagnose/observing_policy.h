// The recipe's precision policy with `mixt diagnose` looking on: every call goes to the
// policy unchanged, and around them the loss, the loss scale, the step's outcome and each
// gradient's float16 underflow are recorded. Gradients are unscaled before the step (as
// the trainer does when clipping), so that what is counted are the true gradients.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "diagnose/module_watch.h"
#include "diagnose/observations.h"
#include "mixt/precision.h"

namespace mixt::diagnose {

class ObservingPolicy final : public PrecisionPolicy {
 public:
  // `parameter_names`: the optimizer's parameters' names, in its order.
  ObservingPolicy(std::unique_ptr<PrecisionPolicy> policy, std::vector<std::string> parameter_names,
                  Observations& into, ModuleWatch& modules);

  void setup(torch::nn::Module& model, at::Device device) override { policy_->setup(model, device); }
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return policy_->optimizer_parameters(model);
  }
  at::Tensor prepare_input(const at::Tensor& inputs) const override { return policy_->prepare_input(inputs); }
  void begin_step(std::int64_t step, bool logged) override;
  AutocastScope autocast(at::DeviceType device) const override { return policy_->autocast(device); }
  void backward(const at::Tensor& loss) override;
  void gradients_ready(Optimizer& optimizer) override { policy_->gradients_ready(optimizer); }
  void unscale(Optimizer& optimizer) override;
  StepOutcome step(Optimizer& optimizer) override;
  void update() override { policy_->update(); }
  std::vector<std::pair<std::string, double>> metrics() const override { return policy_->metrics(); }
  void save(torch::serialize::OutputArchive& archive) const override { policy_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { policy_->load(archive); }

 private:
  double loss_scale() const;

  std::unique_ptr<PrecisionPolicy> policy_;
  std::vector<std::string> parameter_names_;
  Observations& into_;
  ModuleWatch& modules_;
  StepRecord current_;
  at::Tensor loss_sum_;
  bool unscaled_ = false;
};

}  // namespace mixt::diagnose
