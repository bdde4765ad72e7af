// The Trainer's checks that stop a run whose weights went bad (inf/NaN) before any
// checkpoint holds them, and the warning for an epoch in which nothing was learned.
#include "train/trainer.h"
#include "warnings.h"

namespace mixt {

namespace fs = std::filesystem;

bool Trainer::weights_finite() const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  for (const at::Tensor& p : c_.model->parameters()) finite.push_back(at::isfinite(p).all());
  return finite.empty() || at::stack(finite).all().item<bool>();
}

void Trainer::check_loss_finite() const {
  if (!options_.stop_on_nonfinite_loss) return;
  const std::optional<std::int64_t> step = loss_watch_.first_step();
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
void Trainer::warn_if_every_step_was_skipped(std::int64_t steps, std::int64_t skipped) {
  if (steps == 0 || skipped < steps) return;
  warn("the precision policy skipped every step of epoch " + std::to_string(state_.epoch + 1) + " (" +
       std::to_string(skipped) +
       " of them: inf/NaN gradients each time), so the weights did not change; lower optimizer.lr or check the "
       "loss scaler's options");
}

}  // namespace mixt
