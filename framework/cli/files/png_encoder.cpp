#include "files/png_encoder.h"

#include <zlib.h>

#include <string>

#include "mixt/error.h"

namespace mixt::cli {

namespace {

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

// length, type, data, CRC of type and data (PNG spec 5.3).
void put_chunk(std::vector<std::uint8_t>& out, const char* type, const std::vector<std::uint8_t>& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uLong crc = crc32(0L, out.data() + start, static_cast<uInt>(out.size() - start));
  put_u32(out, static_cast<std::uint32_t>(crc));
}

}  // namespace

std::vector<std::uint8_t> encode_png(const at::Tensor& image, const std::vector<std::uint8_t>& palette) {
  const bool indexed = image.dim() == 2;
  if (image.scalar_type() != at::kByte || !(indexed || (image.dim() == 3 && image.size(2) == 3)) ||
      (indexed && (palette.empty() || palette.size() % 3 != 0 || palette.size() > 3 * 256))) {
    throw runtime_error("cannot write a PNG of " + std::string(c10::toString(image.scalar_type())) + " " +
                        c10::str(image.sizes()) + " with a palette of " + std::to_string(palette.size()) +
                        " bytes: expected uint8 [H, W] with 1 to 256 RGB colours, or uint8 [H, W, 3]");
  }
  const at::Tensor pixels = image.contiguous();
  const auto height = static_cast<std::uint32_t>(pixels.size(0)), width = static_cast<std::uint32_t>(pixels.size(1));
  const std::size_t row = static_cast<std::size_t>(width) * (indexed ? 1 : 3);
  // Each row: filter type 0 (none), then its bytes.
  std::vector<std::uint8_t> raw;
  raw.reserve((row + 1) * height);
  const std::uint8_t* data = pixels.data_ptr<std::uint8_t>();
  for (std::uint32_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), data + y * row, data + (y + 1) * row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), Z_BEST_SPEED) != Z_OK) {
    throw runtime_error("zlib could not compress a PNG's pixels");
  }
  packed.resize(packed_size);

  std::vector<std::uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<std::uint8_t> header;
  put_u32(header, width);
  put_u32(header, height);
  // Bit depth 8; colour type 3 (palette) or 2 (RGB); deflate, adaptive filtering, no interlace.
  header.insert(header.end(), {8, static_cast<std::uint8_t>(indexed ? 3 : 2), 0, 0, 0});
  put_chunk(out, "IHDR", header);
  if (indexed) put_chunk(out, "PLTE", palette);
  put_chunk(out, "IDAT", packed);
  put_chunk(out, "IEND", {});
  return out;
}

}  // namespace mixt::cli
