// my_fp16 — a precision policy written outside the mixt tree: float16 autocast plus
// mixt::GradScaler, with one twist of its own: the loss scale never grows above `max_scale`.
// It is built by this folder's CMakeLists.txt against an installed mixt and loaded by
// recipe.yaml through `plugins:`; docs/writing-a-policy.md walks through it.
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <algorithm>

namespace {

class MyFp16Policy : public mixt::PrecisionPolicy {
 public:
  MyFp16Policy(mixt::GradScalerOptions options, double max_scale) : scaler_(options), max_scale_(max_scale) {}

  // The forward pass and the loss run in this scope: matmuls and convolutions in float16.
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kHalf);
  }
  // Scale the loss so that small float16 gradients do not flush to zero.
  void backward(const at::Tensor& loss) override { scaler_.scale(loss).backward(); }
  // Called before gradient clipping: true gradients from here on.
  void unscale(mixt::Optimizer& optimizer) override { scaler_.unscale_(optimizer); }
  // Skips the step when a gradient overflowed; the trainer counts it.
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override { return scaler_.step(optimizer); }
  void update() override {
    scaler_.update();
    // The twist: cap the scale. Reading it is a device sync, so only every 100 steps.
    if (++updates_ % 100 == 0 && scaler_.get_scale() > max_scale_) scaler_.update(max_scale_);
  }

  std::vector<std::pair<std::string, double>> metrics() const override {
    return {{"loss_scale", scaler_.get_scale()}};
  }
  void save(torch::serialize::OutputArchive& archive) const override { scaler_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override { scaler_.load(archive); }

 private:
  mixt::GradScaler scaler_;
  double max_scale_;
  std::int64_t updates_ = 0;
};

// Each option declared once: `mixt describe` lists these, and the factory reads through them.
const mixt::Option<double> kInitScale{"init_scale", 1024.0, "initial loss scale", mixt::above(0)};
const mixt::Option<std::int64_t> kGrowthInterval{"growth_interval", 200, "finite steps before the scale doubles",
                                                 mixt::at_least(1)};
const mixt::Option<double> kMaxScale{"max_scale", 65536.0, "the scale is capped here"};

std::unique_ptr<mixt::PrecisionPolicy> make_my_fp16(const mixt::Config& c, const mixt::PrecisionContext&) {
  mixt::GradScalerOptions options;
  options.init_scale = kInitScale.read(c);
  options.growth_interval = kGrowthInterval.read(c);
  const double max_scale = kMaxScale.read(c);
  if (!(max_scale >= options.init_scale)) c.fail("max_scale", "must be >= init_scale");  // relates two options
  return std::make_unique<MyFp16Policy>(options, max_scale);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("my_fp16",
                          {"example: float16 autocast + GradScaler with a capped scale",
                           {kInitScale, kGrowthInterval, kMaxScale}},
                          make_my_fp16);
}

}  // namespace

MIXT_PLUGIN("my_fp16", "1.0.0", register_components)
