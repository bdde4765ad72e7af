#include "commands/version_text.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include "common/container_image.h"
#include "common/host_allocator.h"
#include "mixt/version.h"

namespace mixt::cli {

std::string version_text() {
  const auto& cuda = at::detail::getCUDAHooks();
  std::string text = std::string("mixt ") + version() + "\nLibTorch " + TORCH_VERSION + "\n";
  const long cudart = cuda.versionCUDART();
  if (cudart > 0) {
    text += "CUDA " + std::to_string(cudart / 1000) + "." + std::to_string((cudart % 1000) / 10) + " (" +
            std::to_string(cuda.hasCUDA() ? cuda.getNumGPUs() : 0) + " GPU(s) usable)\n";
  } else {
    text += "CUDA: not in this LibTorch build\n";
  }
  text += std::string("plugin ABI ") + MIXT_STRINGIFY(MIXT_ABI_MAJOR) "." MIXT_STRINGIFY(MIXT_ABI_MINOR) + " [" +
          build_fingerprint() + "]\n";
  text += "host allocator: " + host_allocator().summary() + "\n";
  if (const std::string image = container_image(); !image.empty()) text += "container image: " + image + "\n";
  return text;
}

}  // namespace mixt::cli
