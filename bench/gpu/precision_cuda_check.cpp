// CUDA-only checks for the GPU run (bench/gpu/run.sh; not part of ctest: CI has no GPU).
// Does the tf32 policy really switch cuBLAS and cuDNN to TF32 math, and does
// fp32 really switch it off? A 2048x2048 matmul and a 3x3 convolution are compared with a
// float64 reference: fp32 math stays near float32 rounding (~1e-6 relative), TF32 rounds the
// inputs to a 10-bit mantissa and lands near 1e-3. Exit 0 when both hold, 1 otherwise.
#include <torch/cuda.h>

#include <cstdio>

#include "plugins.h"
#include "recipe/recipe_loader.h"

namespace {

double relative_error(const at::Tensor& got, const at::Tensor& reference) {
  return ((got.to(at::kDouble) - reference).abs().max() / reference.abs().max()).item<double>();
}

}  // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "precision_cuda_check: no CUDA device\n");
    return 2;
  }
  mixt::testing::BuiltPlugins plugins;
  torch::nn::Module model;
  auto setup = [&](const std::string& name) {
    mixt::RecipeNodePtr root = mixt::parse_yaml("precision: {name: " + name + "}", "check");
    plugins.registry.make_precision(mixt::Config(root, "").section("precision"), mixt::PrecisionContext{at::kCUDA})
        ->setup(model, at::kCUDA);
  };
  at::manual_seed(0);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor a = at::randn({2048, 2048}, cuda), b = at::randn({2048, 2048}, cuda);
  const at::Tensor x = at::randn({16, 64, 32, 32}, cuda), w = at::randn({64, 64, 3, 3}, cuda);
  const at::Tensor mm_reference = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  const at::Tensor conv_reference = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), {}, 1, 1);

  setup("fp32");
  const double mm_fp32 = relative_error(at::mm(a, b), mm_reference);
  const double conv_fp32 = relative_error(at::conv2d(x, w, {}, 1, 1), conv_reference);
  setup("tf32");
  const double mm_tf32 = relative_error(at::mm(a, b), mm_reference);
  const double conv_tf32 = relative_error(at::conv2d(x, w, {}, 1, 1), conv_reference);
  setup("fp32");  // and back: fp32 must switch TF32 off again
  const double mm_back = relative_error(at::mm(a, b), mm_reference);

  std::printf("| op | fp32 policy | tf32 policy | fp32 again |\n|---|---|---|---|\n");
  std::printf("| matmul 2048^3 (cuBLAS) | %.2e | %.2e | %.2e |\n", mm_fp32, mm_tf32, mm_back);
  std::printf("| conv2d 3x3 64->64 (cuDNN) | %.2e | %.2e | |\n", conv_fp32, conv_tf32);
  const bool ok = mm_fp32 < 1e-5 && conv_fp32 < 1e-5 && mm_back < 1e-5 && mm_tf32 > 1e-4 && conv_tf32 > 1e-4 &&
                  mm_tf32 > 10 * mm_fp32 && conv_tf32 > 10 * conv_fp32;
  std::printf("tf32 check: %s\n", ok ? "PASS (TF32-sized error only under the tf32 policy)" : "FAIL");
  return ok ? 0 : 1;
}
