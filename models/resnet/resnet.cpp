#include "resnet.h"

#include <torch/nn/init.h>

#include "../common/layers.h"

namespace mixt::models {

ResNet::ResNet(const ResNetOptions& o) {
  conv1 =
      register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
  bn1 = register_module("bn1", mixt::BatchNorm2d(64));
  layer1 = register_module("layer1", make_layer(o, 64, o.layers.at(0), 1, false));
  layer2 = register_module("layer2", make_layer(o, 128, o.layers.at(1), 2, o.dilate.at(0)));
  layer3 = register_module("layer3", make_layer(o, 256, o.layers.at(2), 2, o.dilate.at(1)));
  layer4 = register_module("layer4", make_layer(o, 512, o.layers.at(3), 2, o.dilate.at(2)));
  const std::int64_t expansion = o.bottleneck ? BottleneckImpl::expansion : BasicBlockImpl::expansion;
  if (o.classifier) fc = register_module("fc", mixt::Linear(512 * expansion, o.num_classes));

  // torchvision's initialisation: He-normal (fan_out) convolutions, BN at (1, 0), the
  // Linear layer keeps its default.
  at::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
  if (o.zero_init_residual) {
    for (auto& module : modules(/*include_self=*/false)) {
      mixt::BatchNorm2d norm{nullptr};
      if (auto* block = module->as<BottleneckImpl>()) norm = block->last_norm();
      if (auto* block = module->as<BasicBlockImpl>()) norm = block->last_norm();
      if (norm) torch::nn::init::zeros_(norm->weight);
    }
  }
}

torch::nn::Sequential ResNet::make_layer(const ResNetOptions& o, std::int64_t planes, std::int64_t blocks,
                                         std::int64_t stride, bool dilate) {
  const std::int64_t expansion = o.bottleneck ? BottleneckImpl::expansion : BasicBlockImpl::expansion;
  // torchvision's _make_layer: a dilated layer's first block keeps the previous dilation.
  const std::int64_t previous_dilation = dilation_;
  if (dilate) {
    dilation_ *= stride;
    stride = 1;
  }
  torch::nn::Sequential layer;
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::int64_t block_stride = i == 0 ? stride : 1;
    torch::nn::Sequential downsample{nullptr};
    if (i == 0 && (stride != 1 || inplanes_ != planes * expansion)) {
      downsample = torch::nn::Sequential(
          torch::nn::Conv2d(torch::nn::Conv2dOptions(inplanes_, planes * expansion, 1).stride(stride).bias(false)),
          mixt::BatchNorm2d(planes * expansion));
    }
    if (o.bottleneck) {
      layer->push_back(std::make_shared<BottleneckImpl>(inplanes_, planes, block_stride, downsample, o.groups,
                                                        o.width_per_group, i == 0 ? previous_dilation : dilation_));
    } else {
      layer->push_back(std::make_shared<BasicBlockImpl>(inplanes_, planes, block_stride, downsample));
    }
    inplanes_ = planes * expansion;
  }
  return layer;
}

std::pair<at::Tensor, at::Tensor> ResNet::forward_stages(const at::Tensor& input) {
  at::Tensor x = at::max_pool2d(bn1->forward(conv1->forward(input)).relu_(), {3, 3}, {2, 2}, {1, 1});
  x = layer2->forward(layer1->forward(x));
  at::Tensor stage3 = layer3->forward(x);
  return {stage3, layer4->forward(stage3)};
}

at::Tensor ResNet::forward(const at::Tensor& input) {
  // The stem (conv1, bn1, relu, maxpool: torchvision has no module for it) is a block of its
  // own, "stem": at 112x112 its saved tensors are the largest a step keeps, so
  // activation_checkpointing: all recomputes it too.
  at::Tensor x = mixt::call_block(*this, "stem", input, [this](const at::Tensor& in) {
    const at::Tensor y = routed(*this, "bn1", bn1, routed(*this, "conv1", conv1, in)).relu_();
    return at::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
  });
  x = routed_blocks(*this, "layer1", layer1, x);
  x = routed_blocks(*this, "layer2", layer2, x);
  x = routed_blocks(*this, "layer3", layer3, x);
  x = routed_blocks(*this, "layer4", layer4, x);
  x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return routed(*this, "fc", fc, x);
}

}  // namespace mixt::models
