// precision/bf16_master — a bfloat16 model with float32 master weights, no loss scaling.
//
// The model's floating-point parameters and buffers are cast to bfloat16 (except the
// submodules of precision.fp32_modules), so its weights, activations and gradients take half
// the memory; the optimizer updates float32 masters (its state is float32 too), and after
// each step the masters are rounded into the model. Updates far below a weight's bfloat16
// resolution therefore accumulate instead of vanishing. The forward pass runs under
// autocast(bfloat16), so float32 modules and reduced-precision ones meet without casts.
// bfloat16 has float32's exponent range: no loss scaler, no skipped step.
#include <mixt/helpers/master_weights.h>
#include <mixt/plugin.h>


#include <string>
#include <vector>

namespace {

class Bf16MasterPolicy : public mixt::PrecisionPolicy {
 public:
  explicit Bf16MasterPolicy(std::vector<std::string> fp32_modules) : fp32_modules_(std::move(fp32_modules)) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    mixt::cast_model(model, at::kBFloat16,
                                [&](const std::string& name) { return mixt::lies_under(name, fp32_modules_); });
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
  std::vector<std::string> fp32_modules_;
  mixt::MasterWeights masters_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_bf16_master(const mixt::Config&, const mixt::PrecisionContext& context) {
  return std::make_unique<Bf16MasterPolicy>(context.fp32_modules);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("bf16_master",
                          {"bfloat16 model, float32 master weights in the optimizer, autocast(bfloat16), no scaler",
                           {}},
                          make_bf16_master);
}

}  // namespace

MIXT_PLUGIN("bf16_master", "1.0.0", register_components)
