// The warm-up length the cosine and warmup schedulers share: in epochs (may be fractional)
// or in optimizer steps, not both.
#pragma once

#include <mixt/config.h>
#include <mixt/options.h>

#include <cmath>
#include <cstdint>

namespace mixt::schedulers {

inline const Option<double> kWarmupEpochs{"warmup_epochs", 0.0, "warm-up length in epochs (may be fractional)",
                                          at_least(0)};
inline const Option<std::int64_t> kWarmupSteps{"warmup_steps", 0,
                                               "warm-up length in optimizer steps (instead of epochs)", at_least(0)};

// The warm-up in optimizer steps.
inline std::int64_t read_warmup_steps(const Config& c, std::int64_t steps_per_epoch) {
  const std::int64_t steps = kWarmupSteps.read(c);
  const double epochs = kWarmupEpochs.read(c);
  if (!c.has(kWarmupEpochs.name())) return steps;
  if (steps > 0) c.fail(kWarmupEpochs.name(), "give warmup_epochs or warmup_steps, not both");
  return static_cast<std::int64_t>(std::llround(epochs * static_cast<double>(steps_per_epoch)));
}

}  // namespace mixt::schedulers
