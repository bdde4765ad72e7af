// precision/fp8_tensorwise — torchao's default float8 training recipe ("tensorwise") on top
// of bf16_master: the chosen linear layers compute their three matmuls in float8 with
// dynamic per-tensor scales (mixt/helpers/float8.h: e4m3 input and weight, e5m2 output
// gradient, at::_scaled_mm); everything else is bf16_master's bfloat16 model under
// autocast(bfloat16), with float32 master weights in the optimizer. No state beyond the
// masters: the scales are computed from each tensor as it is cast.
#include <mixt/helpers/float8.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/bf16_master_policy.h"
#include "../common/float8_layers.h"

namespace {

class Fp8TensorwisePolicy : public mixt::precision::Bf16MasterPolicy {
 public:
  explicit Fp8TensorwisePolicy(mixt::precision::Float8LayerOptions layers)
      : Bf16MasterPolicy(layers.fp32_modules), layers_(std::move(layers)) {}

  void setup(torch::nn::Module& model, at::Device device) override {
    Bf16MasterPolicy::setup(model, device);
    const mixt::precision::Float8Layers chosen = mixt::precision::choose_float8_layers(model, layers_);
    const auto function = std::make_shared<mixt::Float8TensorwiseLinear>();
    for (const mixt::LinearLayer& layer : chosen.float8) layer.set_function(function);
    mixt::precision::warn_misaligned("fp8_tensorwise", chosen);
  }

 private:
  mixt::precision::Float8LayerOptions layers_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_fp8_tensorwise(const mixt::precision::Float8LayerOptions& o,
                                                           const mixt::PrecisionContext& context) {
  return std::make_unique<Fp8TensorwisePolicy>(mixt::precision::with_fp32_modules(o, context.fp32_modules));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("fp8_tensorwise",
                          "torchao's float8 'tensorwise' recipe: linear layers in float8 (dynamic per-tensor scales, "
                          "e4m3 forward, e5m2 output gradient, at::_scaled_mm), the rest as bf16_master",
                          mixt::precision::kFloat8LayerOptions, make_fp8_tensorwise);
}

}  // namespace

MIXT_PLUGIN("fp8_tensorwise", "1.0.0", register_components)
