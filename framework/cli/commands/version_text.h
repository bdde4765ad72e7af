// What `mixt --version` prints: mixt's and LibTorch's versions, the CUDA runtime and its
// GPUs, the plugin ABI and build fingerprint, the host allocator, the container image.
#pragma once

#include <string>

namespace mixt::cli {

std::string version_text();

}  // namespace mixt::cli
