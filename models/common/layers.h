// Building blocks shared by the zoo plugins (header only), mirroring torchvision.ops.misc:
// Conv2dNormActivation (an nn.Sequential: 0 conv, 1 batch norm, 2 activation) and
// SqueezeExcitation (fc1, fc2 1x1 convolutions). Same names, so the same state_dict keys.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "mixt/helpers/batch_norm.h"
#include "mixt/helpers/fp32_modules.h"

namespace mixt::models {

// `module` run as the model's child `name`, so that `precision.fp32_modules` can keep it in
// float32 and `trainer.activation_checkpointing` can name it (mixt/helpers/fp32_modules.h);
// every zoo model routes torchvision's top-level children this way. Unlisted, it is the
// plain call. The lambdas hold pointers to the model's members: a recomputed call runs
// them again in the backward pass.
template <class Module>
at::Tensor routed(const torch::nn::Module& model, const char* name, Module& module, const at::Tensor& x) {
  return mixt::call_submodule(model, name, x, [m = &module](const at::Tensor& in) { return (*m)->forward(in); });
}

// routed() for one of the model's repeated units: `trainer.activation_checkpointing: all`
// recomputes it.
template <class Module>
at::Tensor routed_block(const torch::nn::Module& model, const char* name, Module& module, const at::Tensor& x) {
  return mixt::call_block(model, name, x, [m = &module](const at::Tensor& in) { return (*m)->forward(in); });
}

// `children` (a Chain or torch::nn::Sequential) routed as the model's child `name`, each of
// its children in turn as the block `name.0`, `name.1`, ... (torchvision's names).
template <class Container>
at::Tensor routed_blocks(const torch::nn::Module& model, const char* name, Container& children, const at::Tensor& x) {
  return mixt::call_submodule(
      model, name, x, [&model, prefix = std::string(name), c = &children](const at::Tensor& in) {
        at::Tensor y = in;
        std::size_t i = 0;
        for (torch::nn::AnyModule& child : **c) {
          y = mixt::call_block(model, prefix + "." + std::to_string(i++), y,
                               [block = &child](const at::Tensor& b) { return block->forward(b); });
        }
        return y;
      });
}

// torchvision nests nn.Sequential inside nn.Sequential; torch::nn::Sequential cannot hold
// another Sequential (its forward is a template, which AnyModule cannot wrap). Chain is a
// Sequential with a plain forward: children named "0", "1", ... run in order.
class ChainImpl : public torch::nn::Module {
 public:
  template <typename... Modules>
  explicit ChainImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }
  template <typename M>
  void push_back(M module) {
    torch::nn::AnyModule any(std::move(module));
    register_module(std::to_string(items_.size()), any.ptr());
    items_.push_back(std::move(any));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = x;
    for (auto& item : items_) y = item.forward(y);
    return y;
  }
  std::vector<torch::nn::AnyModule>::iterator begin() { return items_.begin(); }
  std::vector<torch::nn::AnyModule>::iterator end() { return items_.end(); }

 private:
  std::vector<torch::nn::AnyModule> items_;
};
TORCH_MODULE(Chain);

enum class Act { none, relu, relu6, hardswish, hardsigmoid, silu, sigmoid };

inline at::Tensor activate(Act act, const at::Tensor& x) {
  switch (act) {
    case Act::relu: return at::relu(x);
    case Act::relu6: return at::hardtanh(x, 0.0, 6.0);
    case Act::hardswish: return at::hardswish(x);
    case Act::hardsigmoid: return at::hardsigmoid(x);
    case Act::silu: return at::silu(x);
    case Act::sigmoid: return at::sigmoid(x);
    case Act::none: break;
  }
  return x;
}

// A parameterless activation module: it only keeps the Sequential numbering torchvision has.
class ActivationImpl : public torch::nn::Module {
 public:
  explicit ActivationImpl(Act act) : act_(act) {}
  at::Tensor forward(const at::Tensor& x) { return activate(act_, x); }

 private:
  Act act_;
};

struct NormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
};

struct ConvNormAct {
  std::int64_t in, out, kernel = 3, stride = 1, groups = 1;
  Act act = Act::relu;
  NormOptions norm = {};
  std::int64_t dilation = 1;  // torchvision's Conv2dNormActivation pads (kernel - 1) / 2 * dilation
};

inline Chain conv_norm_activation(const ConvNormAct& o) {
  Chain s;
  s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in, o.out, o.kernel)
                                     .stride(o.stride)
                                     .padding((o.kernel - 1) / 2 * o.dilation)
                                     .dilation(o.dilation)
                                     .groups(o.groups)
                                     .bias(false)));
  s->push_back(mixt::BatchNorm2d(torch::nn::BatchNormOptions(o.out).eps(o.norm.eps).momentum(o.norm.momentum)));
  if (o.act != Act::none) s->push_back(std::make_shared<ActivationImpl>(o.act));
  return s;
}

// torchvision.ops.SqueezeExcitation: x * scale_act(fc2(act(fc1(avgpool(x))))).
class SqueezeExcitationImpl : public torch::nn::Module {
 public:
  SqueezeExcitationImpl(std::int64_t channels, std::int64_t squeeze, Act act, Act scale_act)
      : act_(act), scale_act_(scale_act) {
    fc1 = register_module("fc1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, squeeze, 1)));
    fc2 = register_module("fc2", torch::nn::Conv2d(torch::nn::Conv2dOptions(squeeze, channels, 1)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor scale = at::adaptive_avg_pool2d(x, {1, 1});
    scale = activate(scale_act_, fc2->forward(activate(act_, fc1->forward(scale))));
    return scale * x;
  }

 private:
  Act act_, scale_act_;
  torch::nn::Conv2d fc1{nullptr}, fc2{nullptr};
};

// torchvision.models._utils._make_divisible: round to a multiple of `divisor`, never more
// than 10% down.
inline std::int64_t make_divisible(double v, std::int64_t divisor = 8) {
  std::int64_t rounded =
      std::max<std::int64_t>(divisor, static_cast<std::int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

// torchvision.ops.stochastic_depth(mode="row"): drop whole samples of the residual branch
// in training; the same RNG calls as Python, so a seeded run draws the same mask.
inline at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  const double survival = 1.0 - p;
  std::vector<std::int64_t> size(static_cast<std::size_t>(x.dim()), 1);
  size[0] = x.size(0);
  at::Tensor noise = at::empty(size, x.options()).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return x * noise;
}

}  // namespace mixt::models
