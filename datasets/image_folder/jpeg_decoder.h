// JPEG decoding straight through libjpeg(-turbo) into an H x W x C RGB tensor.
//
// Why not cv::imdecode for JPEG: OpenCV 4.6 has libjpeg write RGB, swaps it to BGR in its
// own loop, and we then swap it back — two passes over every pixel that took ~17% of the
// loader's CPU in bench/data_pipeline. Same library, same IDCT (JDCT_ISLOW, PIL's default
// too), one pass less.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>

namespace image_folder {

struct JpegResult {
  at::Tensor image;     // defined on success
  bool truncated = false;  // libjpeg hit the end of the data early
  std::string error;    // libjpeg's message otherwise
};

// channels: 3 (RGB) or 1 (grey). Never throws; CMYK and other unusual JPEGs come back
// with an error so the caller can fall back to OpenCV.
JpegResult decode_jpeg(const std::uint8_t* data, std::size_t size, int channels);

}  // namespace image_folder
