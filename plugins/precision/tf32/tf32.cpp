// precision/tf32 — fp32 storage and fp32 autograd, but matmuls and convolutions on CUDA use
// TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation). Set through LibTorch 2.11's
// per-backend API (Context::setFloat32Precision), the C++ side of
// torch.backends.cuda.matmul.fp32_precision = "tf32" / torch.backends.cudnn.conv.fp32_precision.
// The CPU has no TF32: there the policy runs plain fp32 and says so once.
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <cstdio>

namespace {

class Tf32Policy : public mixt::PrecisionPolicy {
 public:
  void setup(torch::nn::Module&, at::Device device) override {
    auto& context = at::globalContext();
    context.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, at::Float32Precision::TF32);
    context.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV, at::Float32Precision::TF32);
    if (!device.is_cuda()) {
      static bool said = false;  // once per process, however many runs a test makes
      if (!said) {
        std::fprintf(stderr, "mixt: warning: precision tf32: no TF32 on %s; running in plain fp32\n",
                     device.str().c_str());
      }
      said = true;
    }
  }
};

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("tf32", "fp32 storage, TF32 tensor-core matmul and convolution on CUDA (plain fp32 on CPU)",
                          mixt::kNoOptions, [](const mixt::NoOptions&, const mixt::PrecisionContext&) {
                            return std::make_unique<Tf32Policy>();
                          });
}

}  // namespace

MIXT_PLUGIN("tf32", "1.0.0", register_components)
