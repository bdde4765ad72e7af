// Shared by the policies built on mixt::GradScaler (amp_fp16, fp16_master): its recipe
// options (kGradScalerOptions, scaler_options.h) with the context's part, and its
// checkpoint load.
#pragma once

#include <mixt/error.h>
#include <mixt/helpers/grad_scaler.h>
#include <mixt/options.h>
#include <mixt/precision.h>

#include <cstdio>
#include <vector>

#include "scaler_options.h"

namespace mixt::precision {

// The recipe's options (kGradScalerOptions) with what the context adds: the found-inf flag
// agreed across data-parallel ranks.
inline GradScalerOptions with_context(GradScalerOptions options, const PrecisionContext& context) {
  options.communicator = context.communicator;
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
