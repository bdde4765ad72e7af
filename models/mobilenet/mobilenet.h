// MobileNetV2 and MobileNetV3 (large, small) as torchvision defines them
// (torchvision/models/mobilenetv2.py, mobilenetv3.py): nn.Sequential numbering
// ("features.3.block.1.0.weight", "classifier.3.bias"), the same BN eps/momentum.
#pragma once

#include <mixt/model.h>
#include "../common/layers.h"
#include <torch/nn/modules/dropout.h>
#include <mixt/helpers/linear.h>

#include <cstdint>
#include <string>

namespace mixt::models {

std::shared_ptr<Model> make_mobilenet_v2(std::int64_t num_classes, double dropout);
// variant: "large" or "small".
std::shared_ptr<Model> make_mobilenet_v3(const std::string& variant, std::int64_t num_classes, double dropout);
// Its `features` (torchvision's numbering), with the last three blocks dilated for
// segmentation when `dilated` (output stride 16 instead of 32).
Chain mobilenet_v3_features(const std::string& variant, bool dilated);
// torchvision's lraspp_mobilenet_v3_large (segmentation/lraspp.py): logits [batch, classes,
// height, width] at the input's size.
std::shared_ptr<Model> make_lraspp_mobilenet_v3_large(std::int64_t num_classes);

// features -> global average pool -> classifier: the shape every MobileNet shares.
class MobileNet : public Model {
 public:
  MobileNet(Chain features, Chain classifier);
  at::Tensor forward(const at::Tensor& x) override;

 private:
  Chain features_{nullptr}, classifier_{nullptr};
};

// torchvision's init for MobileNets: He-normal (fan_out) convolutions with zero bias,
// BN at (1, 0), Linear N(0, 0.01) with zero bias.
void init_mobilenet(torch::nn::Module& model);

}  // namespace mixt::models
