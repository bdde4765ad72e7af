// Shared by the policies built on mixt::GradScaler (amp_fp16, fp16_master): its recipe
// options with torch.amp.GradScaler's defaults, and its checkpoint load.
#pragma once

#include <mixt/error.h>
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>
#include <mixt/precision.h>

#include <cstdio>
#include <vector>

#include "scaler_options.h"

namespace mixt::precision {

inline const GradScalerOptions kGradScalerDefaults;
inline const Option<double> kInitScale{"init_scale", kGradScalerDefaults.init_scale, "initial loss scale",
                                       in_float32_range()};
inline const Option<double> kGrowthFactor{
    "growth_factor", kGradScalerDefaults.growth_factor, "scale multiplier after growth_interval finite steps (> 1)",
    holds([](double x) { return x > 1; }, "must be > 1 (GradScaler: 'The growth factor must be > 1.0.')")};
inline const Option<double> kBackoffFactor{
    "backoff_factor", kGradScalerDefaults.backoff_factor, "scale multiplier after an inf/NaN gradient (< 1)",
    holds([](double x) { return x > 0 && x < 1; }, "must be in (0, 1) (GradScaler: 'The backoff factor must be < 1.0.')")};
inline const Option<std::int64_t> kGrowthInterval{"growth_interval", kGradScalerDefaults.growth_interval,
                                                  "consecutive finite steps before the scale grows", at_least(1)};
inline const Option<bool> kScalerEnabled{"enabled", kGradScalerDefaults.enabled, "false: no loss scaling"};

// The options above, for a ComponentInfo.
inline std::vector<OptionDoc> grad_scaler_option_infos() {
  return {kInitScale, kGrowthFactor, kBackoffFactor, kGrowthInterval, kScalerEnabled};
}

inline GradScalerOptions read_grad_scaler_options(const Config& c, const PrecisionContext& context) {
  GradScalerOptions options;
  options.communicator = context.communicator;  // found-inf agreed across data-parallel ranks
  options.init_scale = kInitScale.read(c);
  options.growth_factor = kGrowthFactor.read(c);
  options.backoff_factor = kBackoffFactor.read(c);
  options.growth_interval = kGrowthInterval.read(c);
  options.enabled = kScalerEnabled.read(c);
  return options;
}

// As torch.amp.GradScaler.load_state_dict, the checkpoint's growth_factor, backoff_factor
// and growth_interval replace the recipe's; say so when they differ.
inline void load_grad_scaler(GradScaler& scaler, torch::serialize::InputArchive& archive, const char* policy) {
  const double growth_factor = scaler.get_growth_factor(), backoff_factor = scaler.get_backoff_factor();
  const std::int64_t growth_interval = scaler.get_growth_interval();
  scaler.load(archive);
  if (growth_factor != scaler.get_growth_factor() || backoff_factor != scaler.get_backoff_factor() ||
      growth_interval != scaler.get_growth_interval()) {
    char message[400];
    std::snprintf(message, sizeof message,
                  "precision %s: the checkpoint's scaler options replace the recipe's, as in "
                  "torch.amp.GradScaler.load_state_dict: growth_factor %g, backoff_factor %g, growth_interval %lld "
                  "(the recipe has %g, %g, %lld)",
                  policy, scaler.get_growth_factor(), scaler.get_backoff_factor(),
                  static_cast<long long>(scaler.get_growth_interval()), growth_factor, backoff_factor,
                  static_cast<long long>(growth_interval));
    warn(message);
  }
}

}  // namespace mixt::precision
