// torchvision's fcn_resnet50 and deeplabv3_resnet50 (torchvision/models/segmentation/fcn.py,
// deeplabv3.py): a ResNet-50 whose layer3 and layer4 dilate instead of striding (output
// stride 8), without its pool and fc ("backbone.*"), a head on layer4 ("classifier.*") and,
// with aux_loss, an FCN head on layer3 ("aux_classifier.*", whose weights torchvision's
// published checkpoints carry; mixt loads and saves it but its forward returns the main
// output only, torchvision's "out"). The head's logits are upsampled bilinearly to the
// input's size.
#include "segmentation.h"

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>

#include "../common/layers.h"
#include "mixt/helpers/traced_sizes.h"

namespace mixt::models {

namespace {

torch::nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t dilation = 1,
                       bool bias = false) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).padding(kernel == 3 ? dilation : 0).dilation(dilation).bias(bias));
}

Chain conv_bn_relu(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t dilation = 1) {
  return Chain(conv(in, out, kernel, dilation), mixt::BatchNorm2d(out), std::make_shared<ActivationImpl>(Act::relu));
}

// torchvision's FCNHead: 3x3 to in/4 channels, BN, ReLU, dropout 0.1, 1x1 to the classes.
Chain fcn_head(std::int64_t in, std::int64_t classes) {
  const std::int64_t inter = in / 4;
  return Chain(conv(in, inter, 3), mixt::BatchNorm2d(inter), std::make_shared<ActivationImpl>(Act::relu),
               torch::nn::Dropout(0.1), conv(inter, classes, 1, 1, /*bias=*/true));
}

// ASPPPooling: the global average, a 1x1 convolution, BN, ReLU, upsampled back. Child 0 is
// the (parameterless) pool in torchvision: its layers are "1" and "2".
class AsppPoolingImpl : public torch::nn::Module {
 public:
  AsppPoolingImpl(std::int64_t in, std::int64_t out) {
    conv_ = register_module("1", conv(in, out, 1));
    norm_ = register_module("2", mixt::BatchNorm2d(out));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor y = norm_->forward(conv_->forward(at::adaptive_avg_pool2d(x, {1, 1}))).relu();
    return mixt::upsample_bilinear_like(y, x);
  }

 private:
  torch::nn::Conv2d conv_{nullptr};
  mixt::BatchNorm2d norm_{nullptr};
};
TORCH_MODULE(AsppPooling);

// ASPP: a 1x1 branch, three 3x3 branches dilated 12, 24, 36, the pooled branch, concatenated
// and projected to 256 channels (dropout 0.5).
class AsppImpl : public torch::nn::Module {
 public:
  explicit AsppImpl(std::int64_t in) {
    constexpr std::int64_t out = 256;
    convs_ = register_module("convs", torch::nn::ModuleList());
    convs_->push_back(conv_bn_relu(in, out, 1));
    for (std::int64_t rate : {12, 24, 36}) convs_->push_back(conv_bn_relu(in, out, 3, rate));
    convs_->push_back(AsppPooling(in, out));
    project_ = register_module("project", Chain(conv(5 * out, out, 1), mixt::BatchNorm2d(out),
                                                std::make_shared<ActivationImpl>(Act::relu), torch::nn::Dropout(0.5)));
  }
  at::Tensor forward(const at::Tensor& x) {
    std::vector<at::Tensor> branches;
    for (std::size_t i = 0; i + 1 < convs_->size(); ++i) branches.push_back(convs_->ptr<ChainImpl>(i)->forward(x));
    branches.push_back(convs_->ptr<AsppPoolingImpl>(convs_->size() - 1)->forward(x));
    return project_->forward(at::cat(branches, 1));
  }

 private:
  torch::nn::ModuleList convs_{nullptr};
  Chain project_{nullptr};
};
TORCH_MODULE(Aspp);

// torchvision's DeepLabHead: ASPP, 3x3 256 -> 256, BN, ReLU, 1x1 to the classes.
Chain deeplab_head(std::int64_t in, std::int64_t classes) {
  return Chain(Aspp(in), conv(256, 256, 3), mixt::BatchNorm2d(256), std::make_shared<ActivationImpl>(Act::relu),
               conv(256, classes, 1, 1, /*bias=*/true));
}

class SegmentationResNet : public Model {
 public:
  SegmentationResNet(SegmentationHead head, std::int64_t classes, bool aux) {
    ResNetOptions backbone{true, {3, 4, 6, 3}, 1, 64};
    backbone.dilate = {false, true, true};
    backbone.classifier = false;
    backbone_ = register_module("backbone", std::make_shared<ResNet>(backbone));
    classifier_ = register_module(
        "classifier", head == SegmentationHead::fcn ? fcn_head(2048, classes) : deeplab_head(2048, classes));
    if (aux) aux_classifier_ = register_module("aux_classifier", fcn_head(1024, classes));
  }

  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor features = backbone_->forward_stages(x).second;
    const at::Tensor logits = routed(*this, "classifier", classifier_, features);
    return mixt::upsample_bilinear_like(logits, x);
  }

 private:
  std::shared_ptr<ResNet> backbone_;
  Chain classifier_{nullptr}, aux_classifier_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_segmentation_resnet50(SegmentationHead head, std::int64_t classes, bool aux) {
  return std::make_shared<SegmentationResNet>(head, classes, aux);
}

}  // namespace mixt::models
