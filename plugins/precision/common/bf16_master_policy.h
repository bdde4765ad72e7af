// Shared by bf16_master and the float8 policies built on it: a bfloat16 model (but for
// precision.fp32_modules) under autocast(bfloat16), the optimizer stepping float32 masters
// that are rounded into the model after each step, the masters saved in checkpoints.
// A policy on top overrides setup() (calling this one first), and save/load for its own state.
#pragma once

#include <mixt/helpers/master_weights.h>
#include <mixt/precision.h>

#include <string>
#include <utility>
#include <vector>

namespace mixt::precision {

class Bf16MasterPolicy : public PrecisionPolicy, public ShardableMasters {
 public:
  explicit Bf16MasterPolicy(std::vector<std::string> fp32_modules) : fp32_modules_(std::move(fp32_modules)) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    cast_model(model, at::kBFloat16, [&](const std::string& name) { return lies_under(name, fp32_modules_); });
  }
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return masters_.make(model);
  }
  AutocastScope autocast(at::DeviceType device) const override { return AutocastScope(device, at::kBFloat16); }
  void gradients_ready(Optimizer& /*optimizer*/) override { masters_.hand_gradients(); }
  StepOutcome step(Optimizer& optimizer) override {
    optimizer.step();
    masters_.round_into_model();
    return true;
  }
  void save(torch::serialize::OutputArchive& archive) const override { masters_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override { masters_.load(archive); }
  MasterWeights& master_weights() override { return masters_; }

 private:
  std::vector<std::string> fp32_modules_;
  MasterWeights masters_;
};

}  // namespace mixt::precision
