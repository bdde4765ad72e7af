#include "idx_reader.h"

#include <zlib.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

namespace {

// gzopen reads plain files too, so .gz and uncompressed IDX files both work.
std::vector<std::uint8_t> read_all(const std::filesystem::path& file) {
  gzFile in = gzopen(file.c_str(), "rb");
  if (in == nullptr) throw std::runtime_error("cannot open " + file.string());
  std::vector<std::uint8_t> bytes;
  std::array<std::uint8_t, 1 << 16> chunk{};
  int got = 0;
  while ((got = gzread(in, chunk.data(), chunk.size())) > 0) {
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  const bool failed = got < 0;
  gzclose(in);
  if (failed) throw std::runtime_error("cannot decompress " + file.string());
  return bytes;
}

std::uint32_t big_endian(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

// count x rows x cols, or nothing when it overflows: a damaged header's three uint32 can
// claim 2^96 bytes.
std::optional<std::int64_t> image_bytes(std::int64_t count, std::int64_t rows, std::int64_t cols) {
  std::int64_t plane = 0, total = 0;
  if (__builtin_mul_overflow(rows, cols, &plane) || __builtin_mul_overflow(count, plane, &total)) return std::nullopt;
  return total;
}

}  // namespace

at::Tensor read_idx_images(const std::filesystem::path& file) {
  const auto bytes = read_all(file);
  if (bytes.size() < 16 || big_endian(bytes, 0) != 0x00000803) {
    throw std::runtime_error(file.string() + " is not an IDX image file (magic 0x803)");
  }
  const std::int64_t count = big_endian(bytes, 4), rows = big_endian(bytes, 8), cols = big_endian(bytes, 12);
  const std::optional<std::int64_t> payload = image_bytes(count, rows, cols);
  if (!payload || bytes.size() - 16 != static_cast<std::uint64_t>(*payload)) {
    throw std::runtime_error(file.string() + " is truncated: header promises " + std::to_string(count) + " images of " +
                             std::to_string(rows) + " x " + std::to_string(cols) + ", the file holds " +
                             std::to_string(bytes.size() - 16) + " bytes of them");
  }
  at::Tensor images = at::empty({count, 1, rows, cols}, at::kByte);
  std::copy(bytes.begin() + 16, bytes.end(), images.data_ptr<std::uint8_t>());
  return images;
}

at::Tensor read_idx_labels(const std::filesystem::path& file) {
  const auto bytes = read_all(file);
  if (bytes.size() < 8 || big_endian(bytes, 0) != 0x00000801) {
    throw std::runtime_error(file.string() + " is not an IDX label file (magic 0x801)");
  }
  const std::int64_t count = big_endian(bytes, 4);
  if (bytes.size() != static_cast<std::size_t>(8 + count)) {
    throw std::runtime_error(file.string() + " is truncated: header promises " + std::to_string(count) + " labels");
  }
  at::Tensor labels = at::empty({count}, at::kByte);
  std::copy(bytes.begin() + 8, bytes.end(), labels.data_ptr<std::uint8_t>());
  return labels.to(at::kLong);
}

}  // namespace fashion_mnist
