// mixt/helpers/linear.h — linear layers whose computation a precision policy can replace
// (float8 training: mixt/helpers/float8.h).
//
// torch::nn::Linear's forward is not virtual and LibTorch's modules have no forward hooks,
// so nothing outside a model can change how its linear layers compute. A model that wants
// its linear layers to be eligible builds them as mixt::Linear, a drop-in for
// torch::nn::Linear (same options, the parameters `weight` and `bias` under the same names,
// `module->as<torch::nn::Linear>()` still finds it):
//
//   mlp = register_module("mlp", torch::nn::Sequential(mixt::Linear(768, 3072), torch::nn::GELU(),
//                                                      mixt::Linear(3072, 768)));
//
// A module whose linear map's parameters are its own (nn.MultiheadAttention's
// in_proj_weight and in_proj_bias) derives from mixt::LinearMaps, lists the map in
// linear_maps() and computes it with linear("in_proj", x, in_proj_weight, in_proj_bias).
//
// A precision policy finds the layers with linear_layers(model) in setup() and installs a
// LinearFunction on those it wants; any other layer computes at::linear, exactly
// torch::nn::Linear's arithmetic (autocast included).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mixt {

// How a linear layer computes input @ weight^T + bias (bias may be undefined). It must be
// differentiable with respect to all three; it runs inside the policy's autocast region.
// One object may serve many layers, or one per layer may hold that layer's state.
class LinearFunction {
 public:
  virtual ~LinearFunction();
  virtual at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) = 0;
};

// A module that computes linear maps through linear(): the seam a policy changes.
class LinearMaps {
 public:
  struct Map {
    std::string name;  // relative to the module: "" for mixt::Linear itself, "in_proj"
    at::Tensor weight, bias;
  };
  virtual ~LinearMaps();
  // The maps this module computes with linear(), in the order of its forward.
  virtual std::vector<Map> linear_maps() const = 0;

  // Replaces how the map `name` computes (null: at::linear again).
  void set_linear_function(std::string_view name, std::shared_ptr<LinearFunction> function);
  const std::shared_ptr<LinearFunction>& linear_function(std::string_view name) const;

 protected:
  // The map `name`: the installed LinearFunction, or at::linear.
  at::Tensor linear(std::string_view name, const at::Tensor& input, const at::Tensor& weight,
                    const at::Tensor& bias) const;

 private:
  std::vector<std::pair<std::string, std::shared_ptr<LinearFunction>>> functions_;
};

// torch::nn::Linear, computed through LinearMaps::linear(). (clone() gives a plain
// torch::nn::Linear, without the policy's function.)
class LinearImpl : public torch::nn::LinearImpl, public LinearMaps {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& input) { return linear("", input, weight, bias); }
  std::vector<Map> linear_maps() const override { return {{"", weight, bias}}; }
};
TORCH_MODULE(Linear);

// One linear map of a model, as a policy sees it.
struct LinearLayer {
  std::string name;     // the module's name in the model, ".map" appended for a named map
  LinearMaps* owner;    // where set_linear_function() goes
  std::string map;      // the map's name within its owner
  at::Tensor weight, bias;
  std::int64_t in_features() const { return weight.size(1); }
  std::int64_t out_features() const { return weight.size(0); }
  void set_function(std::shared_ptr<LinearFunction> function) const {
    owner->set_linear_function(map, std::move(function));
  }
};

// Every linear map of `model` (its mixt::Linear modules and other LinearMaps), in the order
// of named_modules(): registration order, which for the zoo is the order of the forward pass.
std::vector<LinearLayer> linear_layers(torch::nn::Module& model);

}  // namespace mixt
