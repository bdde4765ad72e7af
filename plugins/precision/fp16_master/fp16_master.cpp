// precision/fp16_master — Apex's O2 ("almost FP16"): a float16 model with float32 master
// weights, batch norm kept in float32, and dynamic loss scaling.
//
// The model's floating-point parameters and buffers are cast to float16, except batch norm
// layers (Apex's keep_batchnorm_fp32: their statistics need float32's range and precision)
// and the submodules of precision.fp32_modules. The loss is scaled as by amp_fp16
// (mixt::GradScaler, torch.amp.GradScaler's options and defaults); after backward the
// float16 gradients are copied into the float32 masters, where the scaler unscales and
// checks them, so clipping and the optimizer work in float32, and a step with an inf/NaN
// gradient is skipped. The forward pass runs under autocast(float16) so that float32
// modules and float16 ones meet without casts.
#include <mixt/helpers/master_weights.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>
#include <torch/nn/modules/batchnorm.h>

#include "../common/grad_scaler_policy.h"

#include <set>
#include <string>
#include <vector>

namespace {

// The qualified names of the model's batch norm layers ("layer1.0.bn1"): torch::nn's, and
// mixt::BatchNorm (derived from them).
std::vector<std::string> batch_norm_layers(const torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const torch::nn::Module* m = item.value().get();
    if (dynamic_cast<const torch::nn::BatchNorm1dImpl*>(m) || dynamic_cast<const torch::nn::BatchNorm2dImpl*>(m) ||
        dynamic_cast<const torch::nn::BatchNorm3dImpl*>(m)) {
      names.push_back(item.key());
    }
  }
  return names;
}

class Fp16MasterPolicy : public mixt::PrecisionPolicy, public mixt::ShardableMasters {
 public:
  Fp16MasterPolicy(mixt::GradScalerOptions options, std::vector<std::string> fp32_modules, bool keep_batchnorm_fp32)
      : scaler_(options), fp32_modules_(std::move(fp32_modules)), keep_batchnorm_fp32_(keep_batchnorm_fp32) {}

  void setup(torch::nn::Module& model, at::Device /*device*/) override {
    std::vector<std::string> kept = fp32_modules_;
    if (keep_batchnorm_fp32_) {
      for (std::string& layer : batch_norm_layers(model)) kept.push_back(std::move(layer));
    }
    mixt::cast_model(model, at::kHalf, [&](const std::string& name) {
      return mixt::lies_under(name, kept);
    });
  }
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return masters_.make(model);
  }
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kHalf);
  }
  void backward(const at::Tensor& loss) override { scaler_.scale(loss).backward(); }
  void gradients_ready(mixt::Optimizer& /*optimizer*/) override { masters_.hand_gradients(); }
  void unscale(mixt::Optimizer& optimizer) override { scaler_.unscale_(optimizer); }
  // A skipped step leaves the masters as they were: rounding them into the model again
  // changes nothing, so the copy needs no host knowledge of the outcome (with a fused
  // optimizer the scaler decides on the device).
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    const mixt::StepOutcome outcome = scaler_.step(optimizer);
    masters_.round_into_model();
    return outcome;
  }
  void update() override { scaler_.update(); }
  mixt::MasterWeights& master_weights() override { return masters_; }

  std::vector<std::pair<std::string, double>> metrics() const override {
    return {{"loss_scale", scaler_.get_scale()}};
  }
  void save(torch::serialize::OutputArchive& archive) const override {
    masters_.save(archive);
    torch::serialize::OutputArchive scaler;
    scaler_.save(scaler);
    archive.write("grad_scaler", scaler);
  }
  void load(torch::serialize::InputArchive& archive) override {
    masters_.load(archive);
    torch::serialize::InputArchive scaler;
    if (!archive.try_read("grad_scaler", scaler)) {
      throw mixt::runtime_error("the checkpoint holds no loss scaler state: another precision policy wrote it",
                                "resume it with the policy it was written with");
    }
    mixt::precision::load_grad_scaler(scaler_, scaler, "fp16_master");
  }

 private:
  mixt::GradScaler scaler_;
  std::vector<std::string> fp32_modules_;
  bool keep_batchnorm_fp32_;
  mixt::MasterWeights masters_;
};

struct Fp16MasterOptions {
  mixt::GradScalerOptions scaler;
  bool keep_batchnorm_fp32 = true;
};

using O = Fp16MasterOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::scaler, mixt::precision::kGradScalerOptions)
                          .add(&O::keep_batchnorm_fp32, "keep_batchnorm_fp32",
                               "batch norm layers stay float32 (Apex O2's default)");

std::unique_ptr<mixt::PrecisionPolicy> make_fp16_master(const Fp16MasterOptions& o,
                                                        const mixt::PrecisionContext& context) {
  return std::make_unique<Fp16MasterPolicy>(mixt::precision::with_context(o.scaler, context), context.fp32_modules,
                                            o.keep_batchnorm_fp32);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("fp16_master",
                          "Apex O2: float16 model, float32 master weights, batch norm in float32, dynamic loss "
                          "scaling (GradScaler)",
                          kOptions, make_fp16_master);
}

}  // namespace

MIXT_PLUGIN("fp16_master", "1.0.0", register_components)
