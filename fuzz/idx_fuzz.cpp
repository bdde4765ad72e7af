// Fuzz target: an IDX file of (Fashion-)MNIST, gzip-compressed or not (the fashion_mnist
// dataset's read_idx_images and read_idx_labels). What must hold:
//   - each reader accepts or refuses with a std::runtime_error naming the file (the plugin
//     makes it a recipe error at `root`); never a crash, a Torch exception or an allocation
//     the header alone asks for;
//   - an uncompressed file it accepts gives its images (N x 1 x rows x cols) or labels (N)
//     holding exactly the bytes after the header.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "fashion_mnist/idx_reader.h"
#include "fuzz_check.h"
#include "scratch_file.h"

namespace {

bool gzip(const std::uint8_t* data, std::size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const ScratchFile file("idx", data, size);
  try {
    const at::Tensor images = fashion_mnist::read_idx_images(file.path);
    MIXT_FUZZ_CHECK(images.dim() == 4 && images.size(1) == 1 && images.scalar_type() == at::kByte,
                    "images are not N x 1 x rows x cols bytes");
    if (!gzip(data, size)) {
      MIXT_FUZZ_CHECK(static_cast<std::size_t>(images.numel()) + 16 == size,
                      "images are not the bytes after the header");
      MIXT_FUZZ_CHECK(images.numel() == 0 || std::equal(data + 16, data + size, images.data_ptr<std::uint8_t>()),
                      "an image byte is not the file's");
    }
  } catch (const std::runtime_error&) {
  }
  try {
    const at::Tensor labels = fashion_mnist::read_idx_labels(file.path);
    MIXT_FUZZ_CHECK(labels.dim() == 1 && labels.scalar_type() == at::kLong, "labels are not N int64");
    if (!gzip(data, size)) {
      MIXT_FUZZ_CHECK(static_cast<std::size_t>(labels.numel()) + 8 == size,
                      "labels are not the bytes after the header");
      const auto read = labels.accessor<std::int64_t, 1>();
      for (std::int64_t i = 0; i < labels.numel(); ++i) {
        MIXT_FUZZ_CHECK(read[i] == data[8 + i], "a label is not the file's byte");
      }
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
