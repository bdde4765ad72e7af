#include <torch/nn/init.h>

#include <cmath>

#include "../common/layers.h"
#include "mobilenet.h"

namespace mixt::models {

namespace {

// torchvision.models.mobilenetv2.InvertedResidual: `conv` is one Sequential holding the
// expansion (if any), the depthwise ConvNormAct, the projection conv and its BN.
class InvertedResidualV2Impl : public torch::nn::Module {
 public:
  InvertedResidualV2Impl(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t expand_ratio)
      : use_residual_(stride == 1 && in == out) {
    const auto hidden = static_cast<std::int64_t>(std::llround(static_cast<double>(in * expand_ratio)));
    Chain layers;
    if (expand_ratio != 1) layers->push_back(conv_norm_activation({in, hidden, 1, 1, 1, Act::relu6}));
    layers->push_back(conv_norm_activation({hidden, hidden, 3, stride, hidden, Act::relu6}));
    layers->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, out, 1).bias(false)));
    layers->push_back(mixt::BatchNorm2d(out));
    conv_ = register_module("conv", layers);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_->forward(x);
    return use_residual_ ? x + y : y;
  }

 private:
  bool use_residual_;
  Chain conv_{nullptr};
};

}  // namespace

MobileNet::MobileNet(Chain features, Chain classifier) {
  features_ = register_module("features", features);
  classifier_ = register_module("classifier", classifier);
  init_mobilenet(*this);
}

at::Tensor MobileNet::forward(const at::Tensor& x) {
  const at::Tensor features = routed_blocks(*this, "features", features_, x);
  return routed(*this, "classifier", classifier_, at::adaptive_avg_pool2d(features, {1, 1}).flatten(1));
}

void init_mobilenet(torch::nn::Module& model) {
  at::NoGradGuard no_grad;
  for (auto& module : model.modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut);
      if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
    } else if (auto* linear = module->as<torch::nn::Linear>()) {
      torch::nn::init::normal_(linear->weight, 0.0, 0.01);
      torch::nn::init::zeros_(linear->bias);
    }
  }
}

std::shared_ptr<Model> make_mobilenet_v2(std::int64_t num_classes, double dropout) {
  // t (expansion), c (channels), n (repeats), s (first stride): torchvision's table.
  const std::int64_t settings[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  std::int64_t channels = make_divisible(32);
  const std::int64_t last_channel = make_divisible(1280);
  Chain features;
  features->push_back(conv_norm_activation({3, channels, 3, 2, 1, Act::relu6}));
  for (const auto& s : settings) {
    const std::int64_t out = make_divisible(static_cast<double>(s[1]));
    for (std::int64_t i = 0; i < s[2]; ++i) {
      features->push_back(std::make_shared<InvertedResidualV2Impl>(channels, out, i == 0 ? s[3] : 1, s[0]));
      channels = out;
    }
  }
  features->push_back(conv_norm_activation({channels, last_channel, 1, 1, 1, Act::relu6}));
  Chain classifier(torch::nn::Dropout(dropout), mixt::Linear(last_channel, num_classes));
  return std::make_shared<MobileNet>(features, classifier);
}

}  // namespace mixt::models
