// precision/bf16_true — Lightning's "bf16-true": the whole model in bfloat16, no masters.
//
// The model's floating-point parameters and buffers are cast to bfloat16 (except the
// submodules of precision.fp32_modules), and so is every batch: weights, gradients and the
// optimizer's state (momentum, Adam's moments) take 2 bytes a value instead of 4. The cost is
// accuracy: an update smaller than half a weight's bfloat16 spacing (8 significant bits:
// 1/256 of its magnitude) is lost, so small learning rates and late, fine-grained training
// stall where bf16_master keeps going. The forward pass runs under autocast(bfloat16), so
// that fp32_modules and the loss (float32 under autocast) meet the bfloat16 model without
// casts. bfloat16 has float32's exponent range: no loss scaler, no skipped step.
#include <mixt/helpers/master_weights.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <string>
#include <vector>

namespace {

class Bf16TruePolicy : public mixt::PrecisionPolicy {
 public:
  explicit Bf16TruePolicy(std::vector<std::string> fp32_modules) : fp32_modules_(std::move(fp32_modules)) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    mixt::cast_model(model, at::kBFloat16,
                                [&](const std::string& name) { return mixt::lies_under(name, fp32_modules_); });
  }
  at::Tensor prepare_input(const at::Tensor& inputs) const override {
    return inputs.is_floating_point() ? inputs.to(at::kBFloat16) : inputs;
  }
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }

 private:
  std::vector<std::string> fp32_modules_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_bf16_true(const mixt::NoOptions&, const mixt::PrecisionContext& context) {
  return std::make_unique<Bf16TruePolicy>(context.fp32_modules);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("bf16_true",
                          "Lightning's bf16-true: model, gradients and optimizer state all bfloat16, no masters",
                          mixt::kNoOptions, make_bf16_true);
}

}  // namespace

MIXT_PLUGIN("bf16_true", "1.0.0", register_components)
