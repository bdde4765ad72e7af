// precision/fp8_tensorwise — torchao's default float8 training recipe ("tensorwise") on top
// of bf16_master: the chosen linear layers compute their three matmuls in float8 with
// dynamic per-tensor scales (mixt/helpers/float8.h: e4m3 input and weight, e5m2 output
// gradient, at::_scaled_mm); everything else is bf16_master's bfloat16 model under
// autocast(bfloat16), with float32 master weights in the optimizer. No state beyond the
// masters: the scales are computed from each tensor as it is cast.
#include <mixt/helpers/float8.h>
#include <mixt/helpers/master_weights.h>
#include <mixt/plugin.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/float8_layers.h"

namespace {

class Fp8TensorwisePolicy : public mixt::PrecisionPolicy {
 public:
  explicit Fp8TensorwisePolicy(mixt::precision::Float8LayerOptions layers) : layers_(std::move(layers)) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    mixt::cast_model(model, at::kBFloat16,
                     [&](const std::string& name) { return mixt::lies_under(name, layers_.fp32_modules); });
    const mixt::precision::Float8Layers chosen = mixt::precision::choose_float8_layers(model, layers_);
    const auto function = std::make_shared<mixt::Float8TensorwiseLinear>();
    for (const mixt::LinearLayer& layer : chosen.float8) layer.set_function(function);
    mixt::precision::warn_misaligned("fp8_tensorwise", chosen);
  }
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return masters_.make(model);
  }
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }
  void gradients_ready(mixt::Optimizer& /*optimizer*/) override { masters_.hand_gradients(); }
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    optimizer.step();
    masters_.round_into_model();
    return true;
  }
  void save(torch::serialize::OutputArchive& archive) const override { masters_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override { masters_.load(archive); }

 private:
  mixt::precision::Float8LayerOptions layers_;
  mixt::MasterWeights masters_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_fp8_tensorwise(const mixt::Config& c,
                                                           const mixt::PrecisionContext& context) {
  return std::make_unique<Fp8TensorwisePolicy>(mixt::precision::read_float8_layer_options(c, context.fp32_modules));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("fp8_tensorwise",
                          {"torchao's float8 'tensorwise' recipe: linear layers in float8 (dynamic per-tensor scales, "
                           "e4m3 forward, e5m2 output gradient, at::_scaled_mm), the rest as bf16_master",
                           {mixt::precision::kFp8Modules, mixt::precision::kFp8Exclude,
                            mixt::precision::kExcludeFirstLast}},
                          make_fp8_tensorwise);
}

}  // namespace

MIXT_PLUGIN("fp8_tensorwise", "1.0.0", register_components)
