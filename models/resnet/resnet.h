// ResNet, ResNeXt and Wide ResNet as torchvision defines them (torchvision/models/resnet.py):
// the same module tree, so the same state_dict names ("layer1.0.conv1.weight",
// "bn1.running_mean", "fc.weight"), shapes and outputs.
#pragma once

#include <mixt/model.h>
#include <mixt/helpers/batch_norm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <mixt/helpers/linear.h>

#include <cstdint>
#include <vector>

namespace mixt::models {

struct ResNetOptions {
  bool bottleneck = false;              // BasicBlock (resnet18/34) or Bottleneck (50 and up)
  std::vector<std::int64_t> layers;     // blocks per stage, e.g. {3, 4, 6, 3}
  std::int64_t groups = 1;              // ResNeXt cardinality
  std::int64_t width_per_group = 64;    // 128 for the wide variants
  std::int64_t num_classes = 1000;
  bool zero_init_residual = false;      // last BN of each block starts at zero
  // torchvision's replace_stride_with_dilation, for layer2, layer3, layer4: dilate instead of
  // striding (its segmentation backbones: {false, true, true}, output stride 8).
  std::vector<bool> dilate = {false, false, false};
  bool classifier = true;  // false: no `fc` (a backbone: forward_stages only)
};

// Two 3x3 convolutions; torchvision's BasicBlock.
class BasicBlockImpl : public torch::nn::Module {
 public:
  static constexpr std::int64_t expansion = 1;
  BasicBlockImpl(std::int64_t inplanes, std::int64_t planes, std::int64_t stride, torch::nn::Sequential downsample);
  at::Tensor forward(const at::Tensor& x);
  mixt::BatchNorm2d last_norm() { return bn2; }

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  mixt::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};

// 1x1 -> 3x3 (grouped, carries the stride: "ResNet V1.5") -> 1x1; torchvision's Bottleneck.
class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr std::int64_t expansion = 4;
  BottleneckImpl(std::int64_t inplanes, std::int64_t planes, std::int64_t stride, torch::nn::Sequential downsample,
                 std::int64_t groups, std::int64_t base_width, std::int64_t dilation = 1);
  at::Tensor forward(const at::Tensor& x);
  mixt::BatchNorm2d last_norm() { return bn3; }

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  mixt::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};
};

class ResNet : public Model {
 public:
  explicit ResNet(const ResNetOptions& options);
  at::Tensor forward(const at::Tensor& x) override;
  // The outputs of layer3 and layer4, for a segmentation head (torchvision's
  // IntermediateLayerGetter with {"layer3": "aux", "layer4": "out"}).
  std::pair<at::Tensor, at::Tensor> forward_stages(const at::Tensor& x);

 private:
  torch::nn::Sequential make_layer(const ResNetOptions& o, std::int64_t planes, std::int64_t blocks,
                                   std::int64_t stride, bool dilate);

  std::int64_t inplanes_ = 64;
  std::int64_t dilation_ = 1;
  torch::nn::Conv2d conv1{nullptr};
  mixt::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  mixt::Linear fc{nullptr};
};

}  // namespace mixt::models
