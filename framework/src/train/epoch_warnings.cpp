#include "train/epoch_warnings.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/warnings.h"
#include "train/figure_text.h"

namespace mixt {

namespace {
const char* const kPrecisionRemedy =
    "run `mixt diagnose` on the recipe: it finds the submodules to keep in float32 (precision.fp32_modules); "
    "or lower optimizer.lr, or check the loss scaler's options (docs/precision.md)";
}  // namespace

// A policy that skips every step (a static loss scale that always overflows, a learning
// rate that makes every gradient inf) leaves the weights as they were: the run would end
// "done" with exit 0 and nothing learned.
void warn_if_most_steps_were_skipped(std::int64_t epoch, std::int64_t steps, std::int64_t skipped) {
  if (steps == 0 || 2 * skipped <= steps) return;
  const std::string number = std::to_string(epoch + 1);
  if (skipped == steps) {
    warn("the precision policy skipped every step of epoch " + number + " (" + std::to_string(skipped) +
         " of them: inf/NaN gradients each time), so the weights did not change; " + kPrecisionRemedy);
    return;
  }
  warn("the precision policy skipped " + std::to_string(skipped) + " of the " + std::to_string(steps) +
       " steps of epoch " + number + " (inf/NaN gradients), so the weights barely trained; " + kPrecisionRemedy);
}

void warn_if_validation_is_not_finite(std::int64_t epoch, const Evaluation& evaluation) {
  if (std::isfinite(evaluation.loss) || evaluation.samples == 0) return;
  const std::string figures = evaluation.figures.empty() ? "" : " (" + figure_text(evaluation.figures.front()) + ")";
  warn("the validation loss after epoch " + std::to_string(epoch + 1) + " is " +
       (std::isnan(evaluation.loss) ? "NaN" : "inf") + figures +
       ": the model's outputs overflow in the policy's precision; " + kPrecisionRemedy);
}

}  // namespace mixt
