#include "joint_transforms.h"

#include <mixt/helpers/transforms.h>

#include <algorithm>
#include <cmath>

namespace segmentation_folder {

namespace {

std::pair<std::int64_t, std::int64_t> shorter_side_to(std::int64_t h, std::int64_t w, std::int64_t size) {
  if (h <= w) return {size, static_cast<std::int64_t>(static_cast<double>(size) * static_cast<double>(w) / h)};
  return {static_cast<std::int64_t>(static_cast<double>(size) * static_cast<double>(h) / w), size};
}

}  // namespace

ImageAndMask resize_shorter_side(const ImageAndMask& pair, std::int64_t size) {
  mixt::SampleRng unused(0);  // resize draws nothing
  ImageAndMask out{mixt::make_resize(size)->apply(pair.image, unused), {}};
  if (pair.mask.defined()) {
    const auto [h, w] = shorter_side_to(pair.mask.size(0), pair.mask.size(1), size);
    const at::Tensor nchw = pair.mask.to(at::kFloat).unsqueeze(0).unsqueeze(0);
    out.mask = at::_upsample_nearest_exact2d(nchw, {h, w}).squeeze(0).squeeze(0).to(at::kByte);
  }
  return out;
}

ImageAndMask horizontal_flip(const ImageAndMask& pair) {
  return {pair.image.flip({1}), pair.mask.defined() ? pair.mask.flip({1}) : at::Tensor()};
}

ImageAndMask pad_if_smaller(const ImageAndMask& pair, std::int64_t size) {
  const std::int64_t h = pair.image.size(0), w = pair.image.size(1);
  if (h >= size && w >= size) return pair;
  const std::int64_t bottom = std::max<std::int64_t>(size - h, 0), right = std::max<std::int64_t>(size - w, 0);
  ImageAndMask out{at::constant_pad_nd(pair.image, {0, 0, 0, right, 0, bottom}, 0), {}};
  if (pair.mask.defined()) out.mask = at::constant_pad_nd(pair.mask, {0, right, 0, bottom}, 255);
  return out;
}

ImageAndMask crop(const ImageAndMask& pair, std::int64_t top, std::int64_t left, std::int64_t size) {
  ImageAndMask out{pair.image.slice(0, top, top + size).slice(1, left, left + size), {}};
  if (pair.mask.defined()) out.mask = pair.mask.slice(0, top, top + size).slice(1, left, left + size);
  return out;
}

std::pair<at::Tensor, at::Tensor> JointTransforms::operator()(ImageAndMask pair, mixt::SampleRng& rng) const {
  if (train) {
    // presets.SegmentationPresetTrain: RandomResize(int(0.5 * base), int(2.0 * base)).
    pair = resize_shorter_side(pair, rng.integer(base_size / 2, 2 * base_size));
    if (hflip_prob > 0 && rng.bernoulli(hflip_prob)) pair = horizontal_flip(pair);
    pair = pad_if_smaller(pair, crop_size);
    // T.RandomCrop.get_params: top and left uniform over the positions that fit.
    const std::int64_t top = rng.integer(0, pair.image.size(0) - crop_size);
    const std::int64_t left = rng.integer(0, pair.image.size(1) - crop_size);
    pair = crop(pair, top, left, crop_size);
  } else {
    pair = pad_if_smaller(resize_shorter_side(pair, base_size), crop_size);
    // torchvision's center_crop: int(round((size - crop) / 2.0)), Python's round: half to even,
    // as std::nearbyint in the default rounding mode (std::round would move 2.5 to 3).
    const auto top = static_cast<std::int64_t>(std::nearbyint((pair.image.size(0) - crop_size) / 2.0));
    const auto left = static_cast<std::int64_t>(std::nearbyint((pair.image.size(1) - crop_size) / 2.0));
    pair = crop(pair, top, left, crop_size);
  }
  static const auto to_tensor = mixt::make_to_tensor();
  static const auto normalize = mixt::make_normalize(mixt::kImageNetMean, mixt::kImageNetStd);
  mixt::SampleRng unused(0);  // neither draws
  const at::Tensor image = normalize->apply(to_tensor->apply(pair.image.contiguous(), unused), unused);
  return {image, pair.mask.defined() ? pair.mask.to(at::kLong) : at::Tensor()};
}

std::string JointTransforms::describe() const {
  const std::string crop = std::to_string(crop_size);
  if (!train) {
    return "resize(" + std::to_string(base_size) + "), mask nearest -> center_crop(" + crop +
           ", pad: image 0, mask 255) -> to_tensor -> normalize";
  }
  return "random_resize(" + std::to_string(base_size / 2) + ".." + std::to_string(2 * base_size) +
         "), mask nearest -> random_horizontal_flip(" + std::to_string(hflip_prob) + ") -> random_crop(" + crop +
         ", pad: image 0, mask 255) -> to_tensor -> normalize";
}

}  // namespace segmentation_folder
