// Shared by the precision policies: the loss-scaler options they read or reject, and their
// checks.
#pragma once

#include <mixt/config.h>
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mixt::precision {

// A loss scale is used as a float32 and inverted for unscaling: outside float32's normal
// range it overflows, its inverse does (a LibTorch error at the first step), or it becomes 0
// (inf * 0 = NaN gradients that the finite check, run before the multiplication, lets through).
inline Check<double> in_float32_range() {
  return [](const double& scale) -> std::optional<std::string> {
    if (scale >= std::numeric_limits<float>::min() && scale <= std::numeric_limits<float>::max()) return std::nullopt;
    return "must lie in float32's normal range [1.18e-38, 3.40e+38]";
  };
}

// A check with its own message: `must be > 1 (GradScaler: '...')`.
inline Check<double> holds(bool (*test)(double), std::string message) {
  return [test, message](const double& value) -> std::optional<std::string> {
    if (test(value)) return std::nullopt;
    return message;
  };
}

// mixt::GradScaler's recipe options (amp_fp16, fp16_master), with torch.amp.GradScaler's
// defaults: GradScalerOptions' initialisers. The communicator comes from the context.
inline const OptionsOf<GradScalerOptions> kGradScalerOptions =
    OptionsOf<GradScalerOptions>()
        .add(&GradScalerOptions::init_scale, "init_scale", "initial loss scale", in_float32_range())
        .add(&GradScalerOptions::growth_factor, "growth_factor",
             "scale multiplier after growth_interval finite steps (> 1)",
             holds([](double x) { return x > 1; }, "must be > 1 (GradScaler: 'The growth factor must be > 1.0.')"))
        .add(&GradScalerOptions::backoff_factor, "backoff_factor", "scale multiplier after an inf/NaN gradient (< 1)",
             holds([](double x) { return x > 0 && x < 1; },
                   "must be in (0, 1) (GradScaler: 'The backoff factor must be < 1.0.')"))
        .add(&GradScalerOptions::growth_interval, "growth_interval", "consecutive finite steps before the scale grows",
             at_least(1))
        .add(&GradScalerOptions::enabled, "enabled", "false: no loss scaling");

// custom_scaler's options of its dynamic mode (Megatron-LM's DynamicGradScaler with
// bounds): custom_scaler rejects them with mode: static.
struct DynamicScalerOptions {
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 1000;
  std::int64_t hysteresis = 2;
};
inline const OptionsOf<DynamicScalerOptions> kDynamicScalerOptions =
    OptionsOf<DynamicScalerOptions>()
        .add(&DynamicScalerOptions::min_scale, "min_scale", "dynamic: the scale never backs off below this",
             in_float32_range())
        .add(&DynamicScalerOptions::max_scale, "max_scale", "dynamic: the scale never grows above this (2^24)",
             in_float32_range())
        .add(&DynamicScalerOptions::growth_factor, "growth_factor",
             "dynamic: multiplier after growth_interval finite steps",
             holds([](double x) { return x > 1; }, "must be > 1"))
        .add(&DynamicScalerOptions::backoff_factor, "backoff_factor", "dynamic: multiplier when hysteresis runs out",
             above(0) && below(1))
        .add(&DynamicScalerOptions::growth_interval, "growth_interval",
             "dynamic: finite steps in a row before growing", at_least(1))
        .add(&DynamicScalerOptions::hysteresis, "hysteresis",
             "dynamic: the hysteresis-th overflow in a row backs off (1: every one; Megatron-LM)",
             [](const std::int64_t& h) -> std::optional<std::string> {
               if (h >= 1) return std::nullopt;
               return "must be at least 1 (1 = back off on every overflow)";
             });

// Every key that configures a loss scaler, for a policy without one (amp_bf16): mixt's
// GradScaler's, the names other trainers give a scaler or a fixed scale, custom_scaler's.
inline std::vector<std::string> loss_scaler_keys() {
  std::vector<std::string> keys = kGradScalerOptions.keys();
  keys.insert(keys.end(), {"scaler", "loss_scale"});
  for (const std::string& key : kDynamicScalerOptions.keys()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

}  // namespace mixt::precision
