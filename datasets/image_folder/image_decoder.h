// Decoding an encoded image (JPEG, PNG, BMP, WebP, TIFF, PPM) with OpenCV into an
// H x W x C uint8 RGB tensor — the input of mixt's transforms.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace image_folder {

// channels: 3 (RGB) or 1 (grey). Throws mixt::BadSample when the bytes do not decode or
// the file is truncated (libjpeg would otherwise return a half-grey image silently).
at::Tensor decode_image(const std::vector<std::uint8_t>& bytes, int channels);

}  // namespace image_folder
