#include "image_decoder.h"

#include <mixt/helpers/data_loader.h>

#include <algorithm>
#include <cstdlib>
#include <string>
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

std::uint32_t big_endian(const std::vector<std::uint8_t>& b, std::size_t at, int bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | b[at + static_cast<std::size_t>(i)];
  return value;
}
std::uint32_t little_endian(const std::vector<std::uint8_t>& b, std::size_t at, int bytes) {
  std::uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | b[at + static_cast<std::size_t>(i)];
  return value;
}
bool starts_with(const std::vector<std::uint8_t>& b, std::size_t at, const char* text) {
  for (std::size_t i = 0; text[i] != '\0'; ++i) {
    if (at + i >= b.size() || b[at + i] != static_cast<std::uint8_t>(text[i])) return false;
  }
  return true;
}

// The first frame header (SOFn) of a JPEG, walking the marker segments before it. Bytes
// between segments are skipped as libjpeg skips them (next_marker: anything up to an FF, and
// FF 00): giving up there let a JPEG with two stray bytes past the bomb check (fuzzing).
std::optional<std::pair<std::int64_t, std::int64_t>> jpeg_size(const std::vector<std::uint8_t>& b) {
  std::size_t at = 2;
  while (at + 9 < b.size()) {
    const std::uint8_t marker = b[at + 1];
    if (b[at] != 0xFF || marker == 0xFF || marker == 0x00) {  // a stray byte, a fill byte, FF 00
      at += b[at] == 0xFF && marker == 0x00 ? 2 : 1;
      continue;
    }
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      at += 2;
      continue;
    }
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) return std::make_pair(std::int64_t{big_endian(b, at + 7, 2)}, std::int64_t{big_endian(b, at + 5, 2)});
    at += 2 + big_endian(b, at + 2, 2);
  }
  return std::nullopt;
}

// The formats an image folder holds (folder_index.cpp's extensions, torchvision's
// IMG_EXTENSIONS), by their leading bytes; only these reach OpenCV.
bool is_folder_format(const std::vector<std::uint8_t>& b) {
  const bool netpbm = b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6';
  const auto tiff_version = [](std::uint8_t v) { return v == 42 || v == 43; };  // TIFF, BigTIFF
  const bool tiff = b.size() >= 4 && ((starts_with(b, 0, "II") && tiff_version(b[2]) && b[3] == 0) ||
                                      (starts_with(b, 0, "MM") && b[2] == 0 && tiff_version(b[3])));
  const bool webp = starts_with(b, 0, "RIFF") && starts_with(b, 8, "WEBP");
  return is_jpeg(b) || starts_with(b, 0, "\x89PNG\r\n\x1a\n") || starts_with(b, 0, "BM") || netpbm || tiff || webp;
}

// width x height > max_pixels, without forming the product: a PNG's header holds two uint32,
// whose product overflows int64.
bool more_pixels_than(const std::pair<std::int64_t, std::int64_t>& size, std::int64_t max_pixels) {
  return size.first > 0 && size.second > max_pixels / size.first;
}

// What claimed_size does not read (TIFF, PPM, a header it reads otherwise than the decoder) is
// bounded once decoded: no image over max_pixels reaches the transforms.
void check_decoded_size(std::int64_t width, std::int64_t height, std::int64_t max_pixels) {
  if (more_pixels_than({width, height}, max_pixels)) {
    throw mixt::BadSample("it decodes to " + std::to_string(width) + " x " + std::to_string(height) +
                          " pixels, more than max_image_pixels (" + std::to_string(max_pixels) + ")");
  }
}

}  // namespace

std::optional<std::pair<std::int64_t, std::int64_t>> claimed_size(const std::vector<std::uint8_t>& b) {
  using Size = std::pair<std::int64_t, std::int64_t>;
  if (is_jpeg(b)) return jpeg_size(b);
  if (b.size() >= 24 && starts_with(b, 0, "\x89PNG\r\n\x1a\n") && starts_with(b, 12, "IHDR")) {
    return Size{big_endian(b, 16, 4), big_endian(b, 20, 4)};
  }
  if (b.size() >= 26 && starts_with(b, 0, "BM")) {  // BITMAPINFOHEADER: signed, negative = top-down
    const auto width = static_cast<std::int32_t>(little_endian(b, 18, 4));
    const auto height = static_cast<std::int32_t>(little_endian(b, 22, 4));
    return Size{std::abs(static_cast<std::int64_t>(width)), std::abs(static_cast<std::int64_t>(height))};
  }
  if (b.size() >= 10 && (starts_with(b, 0, "GIF87a") || starts_with(b, 0, "GIF89a"))) {
    return Size{little_endian(b, 6, 2), little_endian(b, 8, 2)};
  }
  if (b.size() >= 30 && starts_with(b, 0, "RIFF") && starts_with(b, 8, "WEBP")) {
    if (starts_with(b, 12, "VP8X")) return Size{little_endian(b, 24, 3) + 1, little_endian(b, 27, 3) + 1};
    if (starts_with(b, 12, "VP8L")) {
      const std::uint32_t bits = little_endian(b, 21, 4);
      return Size{(bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
    }
    if (starts_with(b, 12, "VP8 ")) return Size{little_endian(b, 26, 2) & 0x3FFF, little_endian(b, 28, 2) & 0x3FFF};
  }
  return std::nullopt;
}

at::Tensor decode_image(const std::vector<std::uint8_t>& bytes, int channels, std::int64_t max_pixels) {
  if (bytes.empty()) throw mixt::BadSample("empty file");
  // OpenCV guesses the format from the bytes and has decoders no image folder needs, and not
  // all are safe on damaged input: GDCM aborts the process on a damaged DICOM (fuzzing).
  if (!is_folder_format(bytes))
    throw mixt::BadSample("cannot decode: not a JPEG, PNG, BMP, PPM/PGM, TIFF or WebP image");
  if (const auto size = claimed_size(bytes); size && more_pixels_than(*size, max_pixels)) {
    throw mixt::BadSample("its header claims " + std::to_string(size->first) + " x " + std::to_string(size->second) +
                          " pixels, more than max_image_pixels (" + std::to_string(max_pixels) +
                          "): a decompression bomb, or raise the dataset's max_image_pixels");
  }
  if (is_jpeg(bytes) && !has_jpeg_end(bytes)) throw mixt::BadSample("truncated JPEG (no end-of-image marker)");
#if MIXT_HAVE_LIBJPEG
  if (is_jpeg(bytes)) {
    JpegResult jpeg = decode_jpeg(bytes.data(), bytes.size(), channels);
    if (jpeg.truncated) throw mixt::BadSample("truncated JPEG (premature end of data)");
    if (jpeg.image.defined()) {
      check_decoded_size(jpeg.image.size(1), jpeg.image.size(0), max_pixels);
      return jpeg.image;
    }
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
  check_decoded_size(decoded.cols, decoded.rows, max_pixels);
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
