// Reads the IDX files of (Fashion-)MNIST, gzip-compressed or not.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>

namespace fashion_mnist {

// uint8 images, N x 1 x rows x cols. Throws std::runtime_error with the file named.
at::Tensor read_idx_images(const std::filesystem::path& file);
// int64 labels, N.
at::Tensor read_idx_labels(const std::filesystem::path& file);

}  // namespace fashion_mnist
