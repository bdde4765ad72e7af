#include <ATen/ATen.h>

#include "resnet.h"

namespace mixt::models {

namespace {
torch::nn::Conv2d conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride = 1, std::int64_t groups = 1,
                          std::int64_t dilation = 1) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3)
                               .stride(stride)
                               .padding(dilation)
                               .dilation(dilation)
                               .groups(groups)
                               .bias(false));
}
torch::nn::Conv2d conv1x1(std::int64_t in, std::int64_t out) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).bias(false));
}
}  // namespace

BasicBlockImpl::BasicBlockImpl(std::int64_t inplanes, std::int64_t planes, std::int64_t stride,
                               torch::nn::Sequential downsample_) {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", mixt::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", mixt::BatchNorm2d(planes));
  if (downsample_) downsample = register_module("downsample", downsample_);
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  at::Tensor out = bn1->forward(conv1->forward(x)).relu_();
  out = bn2->forward(conv2->forward(out));
  out += downsample ? downsample->forward(x) : x;
  return out.relu_();
}

BottleneckImpl::BottleneckImpl(std::int64_t inplanes, std::int64_t planes, std::int64_t stride,
                               torch::nn::Sequential downsample_, std::int64_t groups, std::int64_t base_width,
                               std::int64_t dilation) {
  // torchvision: width = int(planes * (base_width / 64.)) * groups
  const std::int64_t width =
      static_cast<std::int64_t>(static_cast<double>(planes) * (static_cast<double>(base_width) / 64.0)) * groups;
  conv1 = register_module("conv1", conv1x1(inplanes, width));
  bn1 = register_module("bn1", mixt::BatchNorm2d(width));
  conv2 = register_module("conv2", conv3x3(width, width, stride, groups, dilation));
  bn2 = register_module("bn2", mixt::BatchNorm2d(width));
  conv3 = register_module("conv3", conv1x1(width, planes * expansion));
  bn3 = register_module("bn3", mixt::BatchNorm2d(planes * expansion));
  if (downsample_) downsample = register_module("downsample", downsample_);
}

at::Tensor BottleneckImpl::forward(const at::Tensor& x) {
  at::Tensor out = bn1->forward(conv1->forward(x)).relu_();
  out = bn2->forward(conv2->forward(out)).relu_();
  out = bn3->forward(conv3->forward(out));
  out += downsample ? downsample->forward(x) : x;
  return out.relu_();
}

}  // namespace mixt::models
