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

#include "../common/scaler_options.h"

#include <algorithm>
#include <optional>
#include <string>

namespace {

struct ScalerOptions {
  bool dynamic = true;
  double init_scale = 65536.0;
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 1000;
  std::int64_t hysteresis = 2;
};

class CustomScalerPolicy : public mixt::PrecisionPolicy {
 public:
  CustomScalerPolicy(ScalerOptions options, const mixt::Communicator* communicator)
      : o_(options), scale_(options.init_scale), hysteresis_left_(options.hysteresis), communicator_(communicator) {}

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
    if (overflow_) {
      good_steps_ = 0;
      if (--hysteresis_left_ <= 0) scale_ = std::max(scale_ * o_.backoff_factor, o_.min_scale);
    } else if (++good_steps_ == o_.growth_interval) {
      good_steps_ = 0;
      hysteresis_left_ = o_.hysteresis;
      scale_ = std::min(scale_ * o_.growth_factor, o_.max_scale);
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
    scale_ = o_.dynamic ? std::clamp(value.toDouble(), o_.min_scale, o_.max_scale) : o_.init_scale;
    archive.read("good_steps", value);
    good_steps_ = value.toInt();
    archive.read("hysteresis_left", value);
    hysteresis_left_ = std::min(value.toInt(), o_.hysteresis);
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

const ScalerOptions kDefaults;
const mixt::Option<std::string> kMode{"mode", "dynamic", "static: a fixed scale; dynamic: grows and backs off",
                                      mixt::one_of({"dynamic", "static"})};
const mixt::Option<double> kInitScale{"init_scale", kDefaults.init_scale, "initial (or, static, the only) loss scale",
                                      mixt::precision::in_float32_range()};
const mixt::Option<double> kMinScale{"min_scale", kDefaults.min_scale, "dynamic: the scale never backs off below this",
                                     mixt::precision::in_float32_range()};
const mixt::Option<double> kMaxScale{"max_scale", kDefaults.max_scale,
                                     "dynamic: the scale never grows above this (2^24)",
                                     mixt::precision::in_float32_range()};
const mixt::Option<double> kGrowthFactor{
    "growth_factor", kDefaults.growth_factor, "dynamic: multiplier after growth_interval finite steps",
    mixt::precision::holds([](double x) { return x > 1; }, "must be > 1")};
const mixt::Option<double> kBackoffFactor{"backoff_factor", kDefaults.backoff_factor,
                                          "dynamic: multiplier when hysteresis runs out",
                                          mixt::above(0) && mixt::below(1)};
const mixt::Option<std::int64_t> kGrowthInterval{"growth_interval", kDefaults.growth_interval,
                                                 "dynamic: finite steps in a row before growing", mixt::at_least(1)};
const mixt::Option<std::int64_t> kHysteresis{
    "hysteresis", kDefaults.hysteresis,
    "dynamic: the hysteresis-th overflow in a row backs off (1: every one; Megatron-LM)",
    [](const std::int64_t& h) -> std::optional<std::string> {
      if (h >= 1) return std::nullopt;
      return "must be at least 1 (1 = back off on every overflow)";
    }};

std::unique_ptr<mixt::PrecisionPolicy> make_custom_scaler(const mixt::Config& c,
                                                          const mixt::PrecisionContext& context) {
  ScalerOptions o;
  o.dynamic = kMode.read(c) == "dynamic";
  o.init_scale = kInitScale.read(c);
  if (!o.dynamic) {
    for (const std::string& key : {kMinScale.name(), kMaxScale.name(), kGrowthFactor.name(), kBackoffFactor.name(),
                                   kGrowthInterval.name(), kHysteresis.name()}) {
      if (mixt::precision::written(c, key.c_str())) {
        c.fail(key, "only used with mode: dynamic", "remove it, or set mode: dynamic");
      }
    }
    return std::make_unique<CustomScalerPolicy>(o, context.communicator);
  }
  o.min_scale = kMinScale.read(c);
  o.max_scale = kMaxScale.read(c);
  o.growth_factor = kGrowthFactor.read(c);
  o.backoff_factor = kBackoffFactor.read(c);
  o.growth_interval = kGrowthInterval.read(c);
  o.hysteresis = kHysteresis.read(c);
  if (!(o.max_scale >= o.min_scale)) c.fail("max_scale", "must be >= min_scale");
  if (o.init_scale < o.min_scale || o.init_scale > o.max_scale) {
    c.fail("init_scale", "must lie in [min_scale, max_scale]");
  }
  return std::make_unique<CustomScalerPolicy>(o, context.communicator);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision(
      "custom_scaler",
      {"autocast float16 + a hand-written loss scaler: static, or dynamic with bounds and hysteresis",
       {kMode, kInitScale, kMinScale, kMaxScale, kGrowthFactor, kBackoffFactor, kGrowthInterval, kHysteresis}},
      make_custom_scaler);
}

}  // namespace

MIXT_PLUGIN("custom_scaler", "1.1.0", register_components)
