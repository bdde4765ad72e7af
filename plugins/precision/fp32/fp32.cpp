// precision/fp32 — full fp32: no autocast, no loss scaling, and TF32 explicitly off for
// cuBLAS and cuDNN so the FP32 baseline is honest (PyTorch enables TF32 convolutions by
// default).
#include <mixt/plugin.h>
#include <mixt/precision.h>

namespace {

class Fp32Policy : public mixt::PrecisionPolicy {
 public:
  void setup(torch::nn::Module&, at::Device) override {
    auto& context = at::globalContext();
    context.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, at::Float32Precision::IEEE);
    context.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV, at::Float32Precision::IEEE);
  }
};

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("fp32", "full fp32 (TF32 off for cuBLAS and cuDNN)", mixt::kNoOptions,
                          [](const mixt::NoOptions&, const mixt::PrecisionContext&) {
                            return std::make_unique<Fp32Policy>();
                          });
}

}  // namespace

MIXT_PLUGIN("fp32", "1.0.0", register_components)
