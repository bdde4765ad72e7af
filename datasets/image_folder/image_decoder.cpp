#include "image_decoder.h"

#include <mixt/helpers/data_loader.h>

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#if MIXT_HAVE_LIBJPEG
#include "jpeg_decoder.h"
#endif

namespace image_folder {

namespace {

bool is_jpeg(const std::vector<std::uint8_t>& b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

// A complete JPEG ends with the EOI marker FF D9 (some writers append a few bytes after
// it). Entropy-coded data never contains FF D9, so its absence near the end means the
// file was cut short.
bool has_jpeg_end(const std::vector<std::uint8_t>& b) {
  const std::size_t start = b.size() > 1024 ? b.size() - 1024 : 0;
  for (std::size_t i = b.size() - 1; i > start; --i) {
    if (b[i - 1] == 0xFF && b[i] == 0xD9) return true;
  }
  return false;
}

}  // namespace

at::Tensor decode_image(const std::vector<std::uint8_t>& bytes, int channels) {
  if (bytes.empty()) throw mixt::BadSample("empty file");
  if (is_jpeg(bytes) && !has_jpeg_end(bytes)) throw mixt::BadSample("truncated JPEG (no end-of-image marker)");
#if MIXT_HAVE_LIBJPEG
  if (is_jpeg(bytes)) {
    JpegResult jpeg = decode_jpeg(bytes.data(), bytes.size(), channels);
    if (jpeg.truncated) throw mixt::BadSample("truncated JPEG (premature end of data)");
    if (jpeg.image.defined()) return jpeg.image;
    // Otherwise (CMYK, ...): OpenCV below knows more conversions.
  }
#endif
  // PIL (hence torchvision) ignores the EXIF orientation; so do we, for the same pixels.
  const int flags = (channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR) | cv::IMREAD_IGNORE_ORIENTATION;
  cv::Mat decoded;
  try {
    decoded = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<std::uint8_t*>(bytes.data())),
                           flags);
  } catch (const cv::Exception& e) {
    throw mixt::BadSample(std::string("cannot decode: ") + e.what());
  }
  if (decoded.empty()) throw mixt::BadSample("cannot decode (not an image, or corrupt)");
  at::Tensor image = at::empty({decoded.rows, decoded.cols, channels}, at::kByte);
  // Write straight into the tensor's memory: BGR -> RGB for colour, a copy for grey.
  cv::Mat into(decoded.rows, decoded.cols, channels == 1 ? CV_8UC1 : CV_8UC3, image.data_ptr<std::uint8_t>());
  if (channels == 1) {
    decoded.copyTo(into);
  } else {
    cv::cvtColor(decoded, into, cv::COLOR_BGR2RGB);
  }
  return image;
}

}  // namespace image_folder
