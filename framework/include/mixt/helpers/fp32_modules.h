// mixt/helpers/fp32_modules.h — `precision.fp32_modules`: named submodules that run in full precision
// inside the policy's autocast region (e.g. a loss-sensitive head, a softmax-heavy block).
//
// LibTorch's modules have no forward hooks, so the host cannot wrap a submodule by itself;
// the model routes the calls it wants to make eligible through call_submodule():
//
//   at::Tensor forward(const at::Tensor& x) override {
//     at::Tensor h = mixt::call_submodule(*this, "features", x,
//                                         [&](const at::Tensor& in) { return features_->forward(in); });
//     return mixt::call_submodule(*this, "classifier", h.flatten(1),
//                                 [&](const at::Tensor& in) { return classifier_->forward(in); });
//   }
//
// A listed name then runs under FullPrecisionScope (autocast(enabled=False)) with a
// float16/bfloat16 input cast to float32; anything else runs unchanged. The framework reads
// the recipe's list, checks every name against the model's named_modules(), and after the
// first training step fails a run whose model never routed a listed name.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <string>
#include <string_view>
#include <vector>

#include "mixt/autocast.h"

namespace mixt {

// The recipe's list for this model (set by the framework; empty by default).
void set_fp32_modules(const torch::nn::Module& model, std::vector<std::string> names);
// Whether `name` is listed for `model`; also records that the model routes `name`.
bool keeps_in_fp32(const torch::nn::Module& model, std::string_view name);
// The listed names that the model has not routed through call_submodule() so far.
std::vector<std::string> unrouted_fp32_modules(const torch::nn::Module& model);

// Sees the output of every call a model routes through call_submodule(), by name: how
// `mixt diagnose` finds where a forward pass leaves float16's range.
class SubmoduleObserver {
 public:
  virtual ~SubmoduleObserver() = default;
  virtual void observe(std::string_view name, const at::Tensor& output) = 0;
};
// Installs `observer` for `model` (null removes it); the caller keeps it alive meanwhile.
void set_submodule_observer(const torch::nn::Module& model, SubmoduleObserver* observer);
// The observer of `model`, or null (the common case, without a lock).
SubmoduleObserver* submodule_observer(const torch::nn::Module& model);

template <class Fn>
at::Tensor call_submodule(const torch::nn::Module& model, std::string_view name, const at::Tensor& input, Fn&& fn) {
  at::Tensor output;
  if (!keeps_in_fp32(model, name)) {
    output = fn(input);
  } else {
    FullPrecisionScope full_precision(input.device().type());
    const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
    output = fn(reduced ? input.to(at::kFloat) : input);
  }
  if (SubmoduleObserver* observer = submodule_observer(model)) observer->observe(name, output);
  return output;
}

}  // namespace mixt
