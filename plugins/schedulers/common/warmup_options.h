// The warm-up length the cosine and warmup schedulers share: in epochs (may be fractional)
// or in optimizer steps, not both.
#pragma once

#include <mixt/options.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace mixt::schedulers {

struct WarmupOptions {
  double epochs = 0.0;
  std::int64_t steps = 0;
  RecipeSection where;

  // Whether the recipe gave warmup_epochs (even 0: then warmup_steps must not be given).
  bool in_epochs() const { return where.given("warmup_epochs"); }
  // The warm-up in optimizer steps.
  std::int64_t in_steps(std::int64_t steps_per_epoch) const {
    if (!in_epochs()) return steps;
    return static_cast<std::int64_t>(std::llround(epochs * static_cast<double>(steps_per_epoch)));
  }
  // A recipe error at the key the warm-up was given with, for a check only the scheduler can
  // make from its context (a warm-up longer than the run).
  [[noreturn]] void fail(const std::string& message) const {
    where.fail(in_epochs() ? "warmup_epochs" : "warmup_steps", message);
  }
};

inline const OptionsOf<WarmupOptions> kWarmupOptions =
    OptionsOf<WarmupOptions>()
        .add(&WarmupOptions::epochs, "warmup_epochs", "warm-up length in epochs (may be fractional)", at_least(0))
        .add(&WarmupOptions::steps, "warmup_steps", "warm-up length in optimizer steps (instead of epochs)",
             at_least(0))
        .recipe_section(&WarmupOptions::where)
        .rule("warmup_epochs", [](const WarmupOptions& o) -> std::optional<std::string> {
          if (o.in_epochs() && o.steps > 0) return "give warmup_epochs or warmup_steps, not both";
          return std::nullopt;
        });

}  // namespace mixt::schedulers
