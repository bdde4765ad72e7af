// LR-ASPP on a dilated MobileNetV3-Large, as torchvision builds lraspp_mobilenet_v3_large
// (torchvision/models/segmentation/lraspp.py): the backbone's features 0..16, the output of
// features.4 (stride 8, 40 channels) as the low-level input and of features.16 (stride 16,
// 960 channels) as the high-level one; the head gates 128 channels of the high features by
// their global average, upsamples them to the low features' size and adds a 1x1 classifier
// of each; the sum is upsampled bilinearly to the input's size. torchvision's names:
// backbone.N.*, classifier.cbr.*, classifier.scale.1.weight, classifier.low_classifier.*,
// classifier.high_classifier.*.
#include "../common/layers.h"
#include "mixt/helpers/traced_sizes.h"
#include "mobilenet.h"

namespace mixt::models {

namespace {

constexpr std::int64_t kLowStage = 4;  // stage_indices[-4] of the large network: [0, 2, 4, 7, 13, 16]
constexpr std::int64_t kInterChannels = 128;

class LrasppHeadImpl : public torch::nn::Module {
 public:
  LrasppHeadImpl(std::int64_t low_channels, std::int64_t high_channels, std::int64_t num_classes) {
    cbr_ = register_module(
        "cbr", Chain(torch::nn::Conv2d(torch::nn::Conv2dOptions(high_channels, kInterChannels, 1).bias(false)),
                     mixt::BatchNorm2d(torch::nn::BatchNormOptions(kInterChannels)),
                     std::make_shared<ActivationImpl>(Act::relu)));
    // Child 0 is the (parameterless) average pool in torchvision: the 1x1 convolution is "scale.1".
    scale_ = register_module(
        "scale", Chain(std::make_shared<ActivationImpl>(Act::none),
                       torch::nn::Conv2d(torch::nn::Conv2dOptions(high_channels, kInterChannels, 1).bias(false)),
                       std::make_shared<ActivationImpl>(Act::sigmoid)));
    low_classifier_ =
        register_module("low_classifier", torch::nn::Conv2d(torch::nn::Conv2dOptions(low_channels, num_classes, 1)));
    high_classifier_ =
        register_module("high_classifier", torch::nn::Conv2d(torch::nn::Conv2dOptions(kInterChannels, num_classes, 1)));
  }

  at::Tensor forward(const torch::nn::Module& model, const at::Tensor& low, const at::Tensor& high) {
    const at::Tensor gated = routed(model, "classifier.cbr", cbr_, high) *
                             routed(model, "classifier.scale", scale_, at::adaptive_avg_pool2d(high, {1, 1}));
    const at::Tensor upsampled = mixt::upsample_bilinear_like(gated, low);
    return routed(model, "classifier.low_classifier", low_classifier_, low) +
           routed(model, "classifier.high_classifier", high_classifier_, upsampled);
  }

 private:
  Chain cbr_{nullptr}, scale_{nullptr};
  torch::nn::Conv2d low_classifier_{nullptr}, high_classifier_{nullptr};
};
TORCH_MODULE(LrasppHead);

class Lraspp : public Model {
 public:
  explicit Lraspp(std::int64_t num_classes) {
    backbone_ = register_module("backbone", mobilenet_v3_features("large", /*dilated=*/true));
    init_mobilenet(*backbone_);  // torchvision's MobileNetV3 init; the head keeps PyTorch's default
    classifier_ = register_module("classifier", LrasppHead(40, 960, num_classes));
  }

  at::Tensor forward(const at::Tensor& x) override {
    // The backbone's blocks, each routed as "backbone.N" (activation checkpointing, fp32_modules).
    at::Tensor y = x, low;
    std::int64_t i = 0;
    for (torch::nn::AnyModule& block : *backbone_) {
      y = mixt::call_block(*this, "backbone." + std::to_string(i), y,
                           [b = &block](const at::Tensor& in) { return b->forward(in); });
      if (i++ == kLowStage) low = y;
    }
    const at::Tensor logits = classifier_->forward(*this, low, y);
    return mixt::upsample_bilinear_like(logits, x);
  }

 private:
  Chain backbone_{nullptr};
  LrasppHead classifier_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_lraspp_mobilenet_v3_large(std::int64_t num_classes) {
  return std::make_shared<Lraspp>(num_classes);
}

}  // namespace mixt::models
