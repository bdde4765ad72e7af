// precision/amp_fp16 — PyTorch's recipe for float16 mixed precision: the forward pass and
// loss under autocast(float16), and dynamic loss scaling by mixt::GradScaler (a port of
// torch.amp.GradScaler) so that small gradients survive float16's narrow exponent range.
// Options and defaults are GradScaler's own.
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include "../common/float16_on_cpu.h"
#include "../common/scaler_options.h"

#include <cstdio>

namespace {

class AmpFp16Policy : public mixt::PrecisionPolicy {
 public:
  explicit AmpFp16Policy(mixt::GradScalerOptions options) : scaler_(options) {}

  void setup(torch::nn::Module&, at::Device device) override {
    mixt::precision::note_float16_on_cpu("amp_fp16", device);
  }
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
  // As torch.amp.GradScaler.load_state_dict, the checkpoint's growth_factor,
  // backoff_factor and growth_interval replace the recipe's; say so when they differ.
  void load(torch::serialize::InputArchive& archive) override {
    const double growth_factor = scaler_.get_growth_factor(), backoff_factor = scaler_.get_backoff_factor();
    const std::int64_t growth_interval = scaler_.get_growth_interval();
    scaler_.load(archive);
    if (growth_factor != scaler_.get_growth_factor() || backoff_factor != scaler_.get_backoff_factor() ||
        growth_interval != scaler_.get_growth_interval()) {
      std::fprintf(stderr,
                   "mixt: warning: precision amp_fp16: the checkpoint's scaler options replace the recipe's, as in "
                   "torch.amp.GradScaler.load_state_dict: growth_factor %g, backoff_factor %g, growth_interval %lld "
                   "(the recipe has %g, %g, %lld)\n",
                   scaler_.get_growth_factor(), scaler_.get_backoff_factor(),
                   static_cast<long long>(scaler_.get_growth_interval()), growth_factor, backoff_factor,
                   static_cast<long long>(growth_interval));
    }
  }

 private:
  mixt::GradScaler scaler_;
};

// The defaults are GradScaler's own (torch.amp.GradScaler's).
const mixt::GradScalerOptions kDefaults;
const mixt::Option<double> kInitScale{"init_scale", kDefaults.init_scale, "initial loss scale (2^16)",
                                      mixt::precision::in_float32_range()};
const mixt::Option<double> kGrowthFactor{
    "growth_factor", kDefaults.growth_factor, "scale multiplier after growth_interval finite steps (> 1)",
    mixt::precision::holds([](double x) { return x > 1; },
                           "must be > 1 (GradScaler: 'The growth factor must be > 1.0.')")};
const mixt::Option<double> kBackoffFactor{
    "backoff_factor", kDefaults.backoff_factor, "scale multiplier after an inf/NaN gradient (< 1)",
    mixt::precision::holds([](double x) { return x > 0 && x < 1; },
                           "must be in (0, 1) (GradScaler: 'The backoff factor must be < 1.0.')")};
const mixt::Option<std::int64_t> kGrowthInterval{"growth_interval", kDefaults.growth_interval,
                                                 "consecutive finite steps before the scale grows",
                                                 mixt::at_least(1)};
const mixt::Option<bool> kEnabled{"enabled", kDefaults.enabled, "false: autocast without loss scaling"};

std::unique_ptr<mixt::PrecisionPolicy> make_amp_fp16(const mixt::Config& c, const mixt::PrecisionContext& context) {
  mixt::GradScalerOptions options;
  options.communicator = context.communicator;  // found-inf agreed across data-parallel ranks
  options.init_scale = kInitScale.read(c);
  options.growth_factor = kGrowthFactor.read(c);
  options.backoff_factor = kBackoffFactor.read(c);
  options.growth_interval = kGrowthInterval.read(c);
  options.enabled = kEnabled.read(c);
  return std::make_unique<AmpFp16Policy>(options);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("amp_fp16",
                          {"autocast to float16 + dynamic loss scaling (torch.amp.GradScaler semantics)",
                           {kInitScale, kGrowthFactor, kBackoffFactor, kGrowthInterval, kEnabled}},
                          make_amp_fp16);
}

}  // namespace

MIXT_PLUGIN("amp_fp16", "1.0.0", register_components)
