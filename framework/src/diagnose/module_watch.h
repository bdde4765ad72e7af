// The SubmoduleObserver `mixt diagnose` installs on the model: it counts each routed
// module's outputs against float16's range and notes the first one to hold inf/NaN.
#pragma once

#include <torch/nn/module.h>

#include "diagnose/observations.h"
#include "mixt/helpers/fp32_modules.h"

namespace mixt::diagnose {

class ModuleWatch final : public SubmoduleObserver {
 public:
  // Installs itself on `model` until destroyed.
  ModuleWatch(const torch::nn::Module& model, Observations& into);
  ~ModuleWatch() override;
  ModuleWatch(const ModuleWatch&) = delete;
  ModuleWatch& operator=(const ModuleWatch&) = delete;

  void begin_step(std::int64_t step) { step_ = step; }
  void observe(std::string_view name, const at::Tensor& output) override;

 private:
  const torch::nn::Module& model_;
  Observations& into_;
  std::int64_t step_ = 0;
};

}  // namespace mixt::diagnose
