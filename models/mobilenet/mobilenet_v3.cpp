#include "../common/layers.h"
#include "mobilenet.h"

namespace mixt::models {

namespace {

// torchvision's BN for MobileNetV3.
constexpr NormOptions kNorm{0.001, 0.01};

// One row of Tables 1 and 2 of the MobileNetV3 paper, as torchvision lists them.
struct BlockConfig {
  std::int64_t in, kernel, expanded, out;
  bool se;
  bool hardswish;
  std::int64_t stride;
  std::int64_t dilation = 1;  // above 1, the depthwise convolution dilates instead of striding
};

class InvertedResidualV3Impl : public torch::nn::Module {
 public:
  explicit InvertedResidualV3Impl(const BlockConfig& c) : use_residual_(c.stride == 1 && c.in == c.out) {
    const Act act = c.hardswish ? Act::hardswish : Act::relu;
    Chain layers;
    if (c.expanded != c.in) layers->push_back(conv_norm_activation({c.in, c.expanded, 1, 1, 1, act, kNorm}));
    const std::int64_t stride = c.dilation > 1 ? 1 : c.stride;
    layers->push_back(
        conv_norm_activation({c.expanded, c.expanded, c.kernel, stride, c.expanded, act, kNorm, c.dilation}));
    if (c.se) {
      layers->push_back(std::make_shared<SqueezeExcitationImpl>(
          c.expanded, make_divisible(static_cast<double>(c.expanded / 4)), Act::relu, Act::hardsigmoid));
    }
    layers->push_back(conv_norm_activation({c.expanded, c.out, 1, 1, 1, Act::none, kNorm}));
    block_ = register_module("block", layers);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = block_->forward(x);
    return use_residual_ ? y + x : y;
  }

 private:
  bool use_residual_;
  Chain block_{nullptr};
};

// torchvision's _mobilenet_v3_conf: the blocks of the large or small network; `dilated`
// (its segmentation backbones) dilates the last three by 2 instead of striding.
std::vector<BlockConfig> mobilenet_v3_blocks(bool large, bool dilated) {
  // in, kernel, expanded, out, SE, hard-swish, stride (width_mult 1: every value is already a multiple of 8)
  std::vector<BlockConfig> blocks;
  if (large) {
    blocks = {{16, 3, 16, 16, false, false, 1},  {16, 3, 64, 24, false, false, 2},  {24, 3, 72, 24, false, false, 1},
              {24, 5, 72, 40, true, false, 2},   {40, 5, 120, 40, true, false, 1},  {40, 5, 120, 40, true, false, 1},
              {40, 3, 240, 80, false, true, 2},  {80, 3, 200, 80, false, true, 1},  {80, 3, 184, 80, false, true, 1},
              {80, 3, 184, 80, false, true, 1},  {80, 3, 480, 112, true, true, 1},  {112, 3, 672, 112, true, true, 1},
              {112, 5, 672, 160, true, true, 2}, {160, 5, 960, 160, true, true, 1}, {160, 5, 960, 160, true, true, 1}};
  } else {
    blocks = {{16, 3, 16, 16, true, false, 2}, {16, 3, 72, 24, false, false, 2}, {24, 3, 88, 24, false, false, 1},
              {24, 5, 96, 40, true, true, 2},  {40, 5, 240, 40, true, true, 1},  {40, 5, 240, 40, true, true, 1},
              {40, 5, 120, 48, true, true, 1}, {48, 5, 144, 48, true, true, 1},  {48, 5, 288, 96, true, true, 2},
              {96, 5, 576, 96, true, true, 1}, {96, 5, 576, 96, true, true, 1}};
  }
  if (dilated) {
    for (std::size_t i = blocks.size() - 3; i < blocks.size(); ++i) blocks[i].dilation = 2;
  }
  return blocks;
}

}  // namespace

Chain mobilenet_v3_features(const std::string& variant, bool dilated) {
  const std::vector<BlockConfig> blocks = mobilenet_v3_blocks(variant == "large", dilated);
  Chain features;
  features->push_back(conv_norm_activation({3, blocks.front().in, 3, 2, 1, Act::hardswish, kNorm}));
  for (const BlockConfig& b : blocks) features->push_back(std::make_shared<InvertedResidualV3Impl>(b));
  const std::int64_t last_conv = 6 * blocks.back().out;
  features->push_back(conv_norm_activation({blocks.back().out, last_conv, 1, 1, 1, Act::hardswish, kNorm}));
  return features;
}

std::shared_ptr<Model> make_mobilenet_v3(const std::string& variant, std::int64_t num_classes, double dropout) {
  const bool is_large = variant == "large";
  const std::int64_t last_channel = is_large ? 1280 : 1024;
  const std::int64_t last_conv = is_large ? 960 : 576;  // 6 x the last block's channels
  Chain classifier(mixt::Linear(last_conv, last_channel), std::make_shared<ActivationImpl>(Act::hardswish),
                   torch::nn::Dropout(dropout), mixt::Linear(last_channel, num_classes));
  return std::make_shared<MobileNet>(mobilenet_v3_features(variant, /*dilated=*/false), classifier);
}

}  // namespace mixt::models
