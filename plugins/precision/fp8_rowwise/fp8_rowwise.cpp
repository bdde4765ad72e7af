// precision/fp8_rowwise — torchao's float8 training recipe "rowwise" on top of bf16_master:
// the chosen linear layers compute their three matmuls in float8 e4m3 (output gradient
// too) with one scale per row or column, rounded down to a power of two
// (mixt/helpers/float8.h); everything else is bf16_master's bfloat16 model under
// autocast(bfloat16), with float32 master weights in the optimizer. On CUDA the matmuls are
// at::_scaled_mm's rowwise kernel; on the CPU an emulation (dequantise, float32 matmul).
#include <mixt/helpers/float8.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/bf16_master_policy.h"
#include "../common/float8_layers.h"

namespace {

class Fp8RowwisePolicy : public mixt::precision::Bf16MasterPolicy {
 public:
  explicit Fp8RowwisePolicy(mixt::precision::Float8LayerOptions layers)
      : Bf16MasterPolicy(layers.fp32_modules), layers_(std::move(layers)) {}

  void setup(torch::nn::Module& model, at::Device device) override {
    Bf16MasterPolicy::setup(model, device);
    const mixt::precision::Float8Layers chosen = mixt::precision::choose_float8_layers(model, layers_);
    const auto function = std::make_shared<mixt::Float8RowwiseLinear>();
    for (const mixt::LinearLayer& layer : chosen.float8) layer.set_function(function);
    mixt::precision::warn_misaligned("fp8_rowwise", chosen);
  }

 private:
  mixt::precision::Float8LayerOptions layers_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_fp8_rowwise(const mixt::precision::Float8LayerOptions& o,
                                                        const mixt::PrecisionContext& context) {
  return std::make_unique<Fp8RowwisePolicy>(mixt::precision::with_fp32_modules(o, context.fp32_modules));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision(
      "fp8_rowwise",
      "torchao's float8 'rowwise' recipe: linear layers in float8 (dynamic per-row scales rounded "
      "down to a power of two, e4m3 throughout; CUDA's rowwise at::_scaled_mm, on the CPU an "
      "emulation), the rest as bf16_master",
      mixt::precision::kFloat8LayerOptions, make_fp8_rowwise);
}

}  // namespace

MIXT_PLUGIN("fp8_rowwise", "1.0.0", register_components)
