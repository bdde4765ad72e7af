// The random resize, flip and crop of torchvision's segmentation reference
// (references/segmentation/transforms.py, presets.py), applied to an image and its mask
// together so that every pixel keeps its class:
//
//   train: RandomResize(0.5 * base_size, 2.0 * base_size) (the shorter side, drawn as
//          random.randint), RandomHorizontalFlip(hflip_prob), RandomCrop(crop_size) after
//          padding a smaller image at its bottom and right (image 0, mask 255), then
//          to float in [0, 1] and ImageNet's normalize;
//   eval:  resize to base_size, then pad and crop crop_size at the centre, so that a batch
//          stacks (torchvision evaluates whole images one at a time).
//
// The image resizes bilinearly with antialiasing (mixt's resize, the kernel torchvision uses
// for tensors); the mask by nearest neighbour as PIL's NEAREST picks it, torch's
// "nearest-exact": a mask's values are classes, never blended.
#pragma once

#include <ATen/ATen.h>
#include <mixt/helpers/sample_rng.h>

#include <cstdint>
#include <string>

namespace segmentation_folder {

// An image H x W x 3 uint8 and its mask H x W uint8; the mask undefined for mixt predict.
struct ImageAndMask {
  at::Tensor image;
  at::Tensor mask;
};

// The shorter side to `size`, the longer one in proportion (truncated, as torchvision).
ImageAndMask resize_shorter_side(const ImageAndMask& pair, std::int64_t size);
ImageAndMask horizontal_flip(const ImageAndMask& pair);
// Pads the bottom and right up to `size` where smaller: image with 0, mask with 255.
ImageAndMask pad_if_smaller(const ImageAndMask& pair, std::int64_t size);
ImageAndMask crop(const ImageAndMask& pair, std::int64_t top, std::int64_t left, std::int64_t size);

struct JointTransforms {
  bool train = true;
  std::int64_t base_size = 520;
  std::int64_t crop_size = 480;
  double hflip_prob = 0.5;

  // Image float [3, crop, crop] normalized; mask int64 [crop, crop] (undefined when the
  // input's is).
  std::pair<at::Tensor, at::Tensor> operator()(ImageAndMask pair, mixt::SampleRng& rng) const;
  std::string describe() const;
};

}  // namespace segmentation_folder
