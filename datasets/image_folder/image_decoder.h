// Decoding an encoded image (JPEG, PNG, BMP, WebP, TIFF, PPM) with OpenCV into an
// H x W x C uint8 RGB tensor — the input of mixt's transforms.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace image_folder {

// Pillow's Image.MAX_IMAGE_PIXELS: what it calls a decompression bomb, and the default of
// the dataset's max_image_pixels.
inline constexpr std::int64_t kDefaultMaxImagePixels = 89'478'485;

// Width and height as an image's header states them (JPEG, PNG, BMP, GIF, WebP), read
// without decoding; empty for other formats and headers that do not parse.
std::optional<std::pair<std::int64_t, std::int64_t>> claimed_size(const std::vector<std::uint8_t>& bytes);

// channels: 3 (RGB) or 1 (grey). Throws mixt::BadSample when the bytes do not decode, the
// file is truncated (libjpeg would otherwise return a half-grey image silently), or its
// header claims more than `max_pixels` pixels: checked before anything is allocated, since
// a kilobyte's header can claim gigabytes (a decompression bomb). Formats whose header is
// not read here (TIFF, PPM) are bounded by OpenCV's own limit (2^30 pixels) while decoding,
// and refused after it when over `max_pixels`.
at::Tensor decode_image(const std::vector<std::uint8_t>& bytes, int channels,
                        std::int64_t max_pixels = kDefaultMaxImagePixels);

}  // namespace image_folder
