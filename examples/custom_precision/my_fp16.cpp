// my_fp16 — a precision policy written outside the mixt tree: float16 autocast plus
// mixt::GradScaler, with one twist of its own: the loss scale never grows above `max_scale`.
// It is built by this folder's CMakeLists.txt against an installed mixt and loaded by
// recipe.yaml through `plugins:`; docs/writing-a-policy.md walks through it.
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <algorithm>
#include <optional>
#include <string>

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

// The recipe's `precision:` section, each option declared once: the field's initialiser is
// the default, and `mixt describe` lists the same declarations.
struct MyFp16Options {
  double init_scale = 1024.0;
  std::int64_t growth_interval = 200;
  double max_scale = 65536.0;
};

using O = MyFp16Options;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::init_scale, "init_scale", "initial loss scale", mixt::above(0))
        .add(&O::growth_interval, "growth_interval", "finite steps before the scale doubles", mixt::at_least(1))
        .add(&O::max_scale, "max_scale", "the scale is capped here")
        // A check that relates two options: its message is a recipe error at max_scale.
        .rule("max_scale", [](const O& o) -> std::optional<std::string> {
          if (!(o.max_scale >= o.init_scale)) return "must be >= init_scale";
          return std::nullopt;
        });

std::unique_ptr<mixt::PrecisionPolicy> make_my_fp16(const O& o, const mixt::PrecisionContext&) {
  mixt::GradScalerOptions options;
  options.init_scale = o.init_scale;
  options.growth_interval = o.growth_interval;
  return std::make_unique<MyFp16Policy>(options, o.max_scale);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("my_fp16", "example: float16 autocast + GradScaler with a capped scale", kOptions,
                          make_my_fp16);
}

}  // namespace

MIXT_PLUGIN("my_fp16", "1.0.0", register_components)
