// Fuzz target: an image file as the image datasets decode it: image_folder's decode_image
// (OpenCV, libjpeg; JPEG, PNG, BMP, GIF, WebP, TIFF, PPM) in colour and in grey, and
// segmentation_folder's decode_mask (libpng, palette indices). What must hold:
//   - each decoder accepts or refuses with a mixt::BadSample (the dataset's on_bad_sample);
//     nothing else escapes;
//   - an image is H x W x C bytes, C the channels asked; a mask H x W bytes; neither over
//     the max_image_pixels given, and an image whose header claimed_size reads has no more
//     pixels than it claimed (what the bomb check trusts bounds what is decoded).
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "image_folder/image_decoder.h"
#include "mixt/helpers/data_loader.h"
#include "segmentation_folder/mask_decoder.h"

namespace {

// 2^22 pixels: the fuzzer's images stay small, and the limit is what is checked.
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 22;

void check_image(const std::vector<std::uint8_t>& bytes, int channels) {
  at::Tensor image;
  try {
    image = image_folder::decode_image(bytes, channels, kMaxPixels);
  } catch (const mixt::BadSample&) {
    return;
  }
  MIXT_FUZZ_CHECK(image.dim() == 3 && image.size(2) == channels && image.scalar_type() == at::kByte,
                  "an image is not H x W x C bytes");
  const std::int64_t pixels = image.size(0) * image.size(1);
  MIXT_FUZZ_CHECK(pixels > 0 && pixels <= kMaxPixels, "an image of no pixel, or over max_image_pixels");
  if (const auto claimed = image_folder::claimed_size(bytes)) {
    // pixels <= width x height, without the product (two uint32 overflow int64).
    MIXT_FUZZ_CHECK(claimed->first > 0 && (pixels + claimed->first - 1) / claimed->first <= claimed->second,
                    "an image of more pixels than its header claims");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  check_image(bytes, 3);
  check_image(bytes, 1);
  try {
    const at::Tensor mask = segmentation_folder::decode_mask(bytes, kMaxPixels);
    MIXT_FUZZ_CHECK(mask.dim() == 2 && mask.scalar_type() == at::kByte, "a mask is not H x W bytes");
    MIXT_FUZZ_CHECK(mask.numel() <= kMaxPixels, "a mask over max_image_pixels");
  } catch (const mixt::BadSample&) {
  }
  return 0;
}
