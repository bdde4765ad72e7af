// The Trainer's checks that stop a run whose weights went bad (inf/NaN) before any
// checkpoint holds them, and the warnings for an epoch that barely trained or a
// validation that overflowed.
#include <cmath>
#include <cstdio>

#include "train/trainer.h"
#include "common/warnings.h"

namespace mixt {

namespace fs = std::filesystem;

bool Trainer::weights_finite() const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  for (const at::Tensor& p : components_.model->parameters()) finite.push_back(at::isfinite(p).all());
  return finite.empty() || at::stack(finite).all().item<bool>();
}

void Trainer::check_loss_finite() {
  if (!options_.stop_on_nonfinite_loss) return;
  const std::optional<std::int64_t> step = ledger_.first_nonfinite_loss_step();
  if (!step) return;
  const std::string saved = newest_good_checkpoint("it");
  throw runtime_error("the training loss became inf or NaN at step " + std::to_string(*step) + " (epoch " +
                          std::to_string(state_.epoch + 1) +
                          "); the weights are no longer usable, so training stopped and " + saved,
                      "lower optimizer.lr, clip gradients (trainer.clip_grad_norm), or use a loss-scaling precision "
                      "policy; trainer.stop_on_nonfinite_loss=false trains on regardless");
}

std::string Trainer::newest_good_checkpoint(const std::string& before_what) const {
  if (run_ && fs::exists(run_->checkpoints() / "last")) {
    return "the newest checkpoint (" + (run_->checkpoints() / "last").string() + ") is from before " + before_what;
  }
  if (!resumed_from_.empty()) {
    return "no checkpoint was written from them; the one this run resumed from (" + resumed_from_.string() +
           ") is from before " + before_what;
  }
  return "no checkpoint was written from them";
}

// The loss watch sees applied steps only. A step applied with gradients that were not
// finite (a loss scale of 0 turns them into inf * 0 = NaN after the policy's finite check)
// breaks the weights with every loss finite, then the policy skips every later step: the
// weights themselves are checked once per epoch, before its checkpoint.
void Trainer::check_weights_finite() const {
  if (!options_.stop_on_nonfinite_loss || weights_finite()) return;
  const std::string saved = newest_good_checkpoint("them");
  throw runtime_error("the weights hold inf or NaN after epoch " + std::to_string(state_.epoch + 1) +
                          " although every applied step's loss was finite; training stopped and " + saved,
                      "a step was applied with non-finite gradients: check the precision policy's options (a loss "
                      "scale near 0 or float32's limits) and optimizer.lr; trainer.stop_on_nonfinite_loss=false "
                      "trains on regardless");
}

// A policy that skips every step (a static loss scale that always overflows, a learning
// rate that makes every gradient inf) leaves the weights as they were: the run would end
// "done" with exit 0 and nothing learned.
namespace {
const char* const kPrecisionRemedy =
    "run `mixt diagnose` on the recipe: it finds the submodules to keep in float32 (precision.fp32_modules); "
    "or lower optimizer.lr, or check the loss scaler's options (docs/precision.md)";
}  // namespace

void Trainer::warn_if_most_steps_were_skipped(std::int64_t steps, std::int64_t skipped) {
  if (steps == 0 || 2 * skipped <= steps) return;
  const std::string epoch = std::to_string(state_.epoch + 1);
  if (skipped == steps) {
    warn("the precision policy skipped every step of epoch " + epoch + " (" + std::to_string(skipped) +
         " of them: inf/NaN gradients each time), so the weights did not change; " + kPrecisionRemedy);
    return;
  }
  warn("the precision policy skipped " + std::to_string(skipped) + " of the " + std::to_string(steps) +
       " steps of epoch " + epoch + " (inf/NaN gradients), so the weights barely trained; " + kPrecisionRemedy);
}

void Trainer::warn_if_validation_is_not_finite(const Evaluation& evaluation) {
  if (std::isfinite(evaluation.loss) || evaluation.samples == 0) return;
  char top1[32];
  std::snprintf(top1, sizeof(top1), "%.2f%%", 100.0 * evaluation.top1);
  warn("the validation loss after epoch " + std::to_string(state_.epoch + 1) + " is " +
       (std::isnan(evaluation.loss) ? "NaN" : "inf") + " (top-1 " + top1 +
       "): the model's outputs overflow in the policy's precision; " + kPrecisionRemedy);
}

}  // namespace mixt
