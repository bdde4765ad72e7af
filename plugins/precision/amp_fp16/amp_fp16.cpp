// precision/amp_fp16 — PyTorch's recipe for float16 mixed precision: the forward pass and
// loss under autocast(float16), and dynamic loss scaling by mixt::GradScaler (a port of
// torch.amp.GradScaler) so that small gradients survive float16's narrow exponent range.
// Options and defaults are GradScaler's own.
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include "../common/grad_scaler_policy.h"

namespace {

class AmpFp16Policy : public mixt::PrecisionPolicy {
 public:
  explicit AmpFp16Policy(mixt::GradScalerOptions options) : scaler_(options) {}

  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kHalf);
  }
  void backward(const at::Tensor& loss) override { scaler_.scale(loss).backward(); }
  void unscale(mixt::Optimizer& optimizer) override { scaler_.unscale_(optimizer); }
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override { return scaler_.step(optimizer); }
  void update() override { scaler_.update(); }

  std::vector<std::pair<std::string, double>> metrics() const override {
    return {{"loss_scale", scaler_.get_scale()}};
  }
  void save(torch::serialize::OutputArchive& archive) const override { scaler_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override {
    mixt::precision::load_grad_scaler(scaler_, archive, "amp_fp16");
  }

 private:
  mixt::GradScaler scaler_;
};

std::unique_ptr<mixt::PrecisionPolicy> make_amp_fp16(const mixt::GradScalerOptions& o,
                                                     const mixt::PrecisionContext& context) {
  return std::make_unique<AmpFp16Policy>(mixt::precision::with_context(o, context));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("amp_fp16", "autocast to float16 + dynamic loss scaling (torch.amp.GradScaler semantics)",
                          mixt::precision::kGradScalerOptions, make_amp_fp16);
}

}  // namespace

MIXT_PLUGIN("amp_fp16", "1.0.0", register_components)
