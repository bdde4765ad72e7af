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
// float16/bfloat16 input cast to float32; anything else runs unchanged. The same seam
// carries activation checkpointing: call_block marks the model's repeated units. The framework reads
// the recipe's list, checks every name against the model's named_modules(), and after the
// first training step fails a run whose model never routed a listed name.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <string>
#include <string_view>
#include <vector>

#include "mixt/autocast.h"
#include "mixt/helpers/activation_checkpointing.h"

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

namespace detail {
// While LibTorch's tracer runs (mixt export), the nodes recorded inside a routed call carry
// the submodule's name as their scope: an op export cannot translate is named with the
// module it came from. Nothing happens otherwise.
class TraceScope {
 public:
  explicit TraceScope(std::string_view name);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool pushed_ = false;
};

template <class Fn>
at::Tensor run_routed(const torch::nn::Module& model, std::string_view name, const at::Tensor& input, Fn& fn) {
  if (!keeps_in_fp32(model, name)) return fn(input);
  FullPrecisionScope full_precision(input.device().type());
  const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  return fn(reduced ? input.to(at::kFloat) : input);
}

template <class Fn>
at::Tensor route(const torch::nn::Module& model, std::string_view name, const at::Tensor& input, Fn&& fn, bool block) {
  const TraceScope scope(name);
  at::Tensor output;
  if (checkpoints_activations(model, name, block) && at::GradMode::is_enabled()) {
    output = recompute_in_backward(
        [&model, name = std::string(name), fn](const at::Tensor& in) mutable { return run_routed(model, name, in, fn); },
        input);
  } else {
    output = run_routed(model, name, input, fn);
  }
  if (SubmoduleObserver* observer = submodule_observer(model); observer && !recomputing()) {
    observer->observe(name, output);
  }
  return output;
}
}  // namespace detail

// fn(input), run as the model's submodule `name`: in float32 when precision.fp32_modules
// lists it, recomputed in the backward pass when trainer.activation_checkpointing names it.
// `fn` may be called again during backward (mixt/helpers/activation_checkpointing.h):
// capture members or values, not references to the caller's locals.
template <class Fn>
at::Tensor call_submodule(const torch::nn::Module& model, std::string_view name, const at::Tensor& input, Fn&& fn) {
  return detail::route(model, name, input, std::forward<Fn>(fn), /*block=*/false);
}

// call_submodule() for one of the model's repeated units (a residual block, an encoder
// layer, a stage): the calls that `trainer.activation_checkpointing: all` recomputes.
template <class Fn>
at::Tensor call_block(const torch::nn::Module& model, std::string_view name, const at::Tensor& input, Fn&& fn) {
  return detail::route(model, name, input, std::forward<Fn>(fn), /*block=*/true);
}

}  // namespace mixt
