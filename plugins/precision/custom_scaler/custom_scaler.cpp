// precision/custom_scaler — float16 autocast with a loss scaler written the way a user
// would write their own (the worked example of docs/writing-a-policy.md), instead of reusing
// mixt::GradScaler:
//   - static: one fixed scale; a step whose gradients overflow is skipped, nothing else.
//   - dynamic: Megatron-LM's DynamicGradScaler with bounds. An overflow skips the step and
//     uses up one unit of `hysteresis`; only when none is left does the scale back off
//     (never below min_scale). growth_interval finite steps in a row grow the scale (never
//     above max_scale) and refill the hysteresis.
// The scale lives on the host: step() must read the overflow flag anyway to decide whether
// to step, so keeping the scaler's bookkeeping in plain doubles costs no extra sync. The
// exception is a static scale with a fused optimizer: nothing to book-keep, so the step is
// decided on the device (Optimizer::step_scaled) and not read back.
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include "../common/scaler_options.h"

#include <algorithm>
#include <optional>
#include <string>

namespace {

// The recipe's `precision:` section. The dynamic mode's options are declared in
// ../common/scaler_options.h, where amp_bf16 finds the same keys to reject.
struct ScalerOptions {
  bool dynamic = true;  // mode: dynamic (false: static)
  double init_scale = 65536.0;
  mixt::precision::DynamicScalerOptions when_dynamic;
};

class CustomScalerPolicy : public mixt::PrecisionPolicy {
 public:
  CustomScalerPolicy(ScalerOptions options, const mixt::Communicator* communicator)
      : o_(options),
        scale_(options.init_scale),
        hysteresis_left_(options.when_dynamic.hysteresis),
        communicator_(communicator) {}

  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kHalf);
  }

  // Multiplying by a host double adds no device sync.
  void backward(const at::Tensor& loss) override { (loss * scale_).backward(); }

  // Divides every gradient by the scale in one fused kernel per device and dtype, which
  // also sets found_inf_ when any gradient holds an inf or NaN.
  void unscale(mixt::Optimizer& optimizer) override {
    if (unscaled_) return;
    std::vector<at::Tensor> grads;
    for (const at::Tensor& param : optimizer.parameters()) {
      if (param.grad().defined()) grads.push_back(param.grad());
    }
    if (grads.empty()) return;
    const auto options = at::TensorOptions().dtype(at::kFloat).device(grads.front().device());
    found_inf_ = at::zeros({}, options);
    const at::Tensor inv_scale = at::full({}, 1.0 / scale_, options);
    // The kernel wants one device and one dtype per call; fp32 master weights give exactly that.
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
    // Data parallel: every rank must skip the same steps (see GradScalerOptions::communicator).
    if (communicator_ != nullptr && communicator_->world_size() > 1) {
      communicator_->all_reduce(found_inf_, mixt::ReduceOp::max);
    }
    unscaled_ = true;
  }

  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    unscale(optimizer);
    // A static scale needs no host bookkeeping: a fused optimizer skips on the device, and
    // the trainer reads the flag only if it must (mixt/step_outcome.h). The gradients are
    // unscaled already, so no grad_scale.
    if (!o_.dynamic && found_inf_.defined() && optimizer.can_step_scaled()) {
      optimizer.step_scaled(at::Tensor(), found_inf_);
      return mixt::StepOutcome::skipped_if(found_inf_.clone());
    }
    overflow_ = found_inf_.defined() && found_inf_.item<float>() > 0;  // the one sync per step
    if (!overflow_) optimizer.step();
    return !overflow_;
  }

  void update() override {
    unscaled_ = false;
    if (!o_.dynamic) return;
    const mixt::precision::DynamicScalerOptions& d = o_.when_dynamic;
    if (overflow_) {
      good_steps_ = 0;
      if (--hysteresis_left_ <= 0) scale_ = std::max(scale_ * d.backoff_factor, d.min_scale);
    } else if (++good_steps_ == d.growth_interval) {
      good_steps_ = 0;
      hysteresis_left_ = d.hysteresis;
      scale_ = std::min(scale_ * d.growth_factor, d.max_scale);
    }
  }

  std::vector<std::pair<std::string, double>> metrics() const override { return {{"loss_scale", scale_}}; }

  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("scale", c10::IValue(scale_));
    archive.write("good_steps", c10::IValue(good_steps_));
    archive.write("hysteresis_left", c10::IValue(hysteresis_left_));
  }
  // The recipe's options hold for the resumed run: a static scale is the recipe's, a
  // dynamic one is kept within the recipe's bounds and hysteresis.
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    archive.read("scale", value);
    scale_ = o_.dynamic ? std::clamp(value.toDouble(), o_.when_dynamic.min_scale, o_.when_dynamic.max_scale)
                        : o_.init_scale;
    archive.read("good_steps", value);
    good_steps_ = value.toInt();
    archive.read("hysteresis_left", value);
    hysteresis_left_ = std::min(value.toInt(), o_.when_dynamic.hysteresis);
  }

 private:
  ScalerOptions o_;
  double scale_;
  std::int64_t good_steps_ = 0;  // finite steps since the last growth or overflow
  std::int64_t hysteresis_left_;
  at::Tensor found_inf_;
  const mixt::Communicator* communicator_ = nullptr;
  bool unscaled_ = false;
  bool overflow_ = false;
};

using O = ScalerOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .choice(&O::dynamic, "mode", {{"dynamic", true}, {"static", false}},
                "static: a fixed scale; dynamic: grows and backs off")
        .add(&O::init_scale, "init_scale", "initial (or, static, the only) loss scale",
             mixt::precision::in_float32_range())
        // Before their own value checks: with mode: static they are not used at all.
        .refuse(mixt::precision::kDynamicScalerOptions.keys(), "only used with mode: dynamic",
                "remove it, or set mode: dynamic", [](const O& o) { return !o.dynamic; })
        .include(&O::when_dynamic, mixt::precision::kDynamicScalerOptions)
        .rule("max_scale", [](const O& o) -> std::optional<std::string> {
          if (o.dynamic && !(o.when_dynamic.max_scale >= o.when_dynamic.min_scale)) return "must be >= min_scale";
          return std::nullopt;
        })
        .rule("init_scale", [](const O& o) -> std::optional<std::string> {
          if (o.dynamic && (o.init_scale < o.when_dynamic.min_scale || o.init_scale > o.when_dynamic.max_scale)) {
            return "must lie in [min_scale, max_scale]";
          }
          return std::nullopt;
        });

std::unique_ptr<mixt::PrecisionPolicy> make_custom_scaler(const ScalerOptions& o,
                                                          const mixt::PrecisionContext& context) {
  return std::make_unique<CustomScalerPolicy>(o, context.communicator);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision(
      "custom_scaler", "autocast float16 + a hand-written loss scaler: static, or dynamic with bounds and hysteresis",
      kOptions, make_custom_scaler);
}

}  // namespace

MIXT_PLUGIN("custom_scaler", "1.1.0", register_components)
