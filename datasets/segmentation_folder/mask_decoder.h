// Decoding a segmentation mask PNG into its class indices, H x W uint8.
//
// VOC's masks are palette PNGs whose pixel values are indices into the VOC palette, the
// index being the class (255: border / ignore). OpenCV expands a palette into colours, so
// the indices are read here with libpng, untransformed: a palette PNG gives its indices, an
// 8-bit grey PNG (a plain index mask) its values. As PIL's np.array(Image.open(mask)).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace segmentation_folder {

// Throws mixt::BadSample for bytes that are not a PNG, a corrupt or truncated one, one of
// more than `max_pixels` pixels (checked from its header, before decoding), or a colour
// type a mask cannot be (RGB, grey with alpha, 16-bit grey).
at::Tensor decode_mask(const std::vector<std::uint8_t>& bytes, std::int64_t max_pixels);

}  // namespace segmentation_folder
