#include "train/stop_decider.h"

#include "common/interrupt.h"

namespace mixt {

StopDecider::StopDecider(Components& components, const TrainerOptions& options, const TrainState& state,
                         StepLedger& ledger, const Coordinator& coordinator,
                         std::function<std::string(const std::string&)> newest_good_checkpoint)
    : components_(components),
      options_(options),
      state_(state),
      ledger_(ledger),
      coordinator_(coordinator),
      newest_good_checkpoint_(std::move(newest_good_checkpoint)) {}

// A signal on any rank or a callback's after-step request on any rank stops every rank
// after this same step.
StopDecider::Stop StopDecider::after_step(bool loss_read) {
  // Data parallel, the loss is every rank's mean: every rank throws here at the same step.
  if (loss_read) check_loss_finite();
  return vote(/*after_step=*/true);
}

// A signal during the evaluation or the checkpoint: the epoch's checkpoint is written, so
// stopping here loses nothing, where going on would wait for one more training step.
StopDecider::Stop StopDecider::at_epoch_end() { return vote(/*after_step=*/false); }

// One small all-reduce (none in one process): any rank's signal interrupts every rank; any
// rank's request (after a step: an after_step one) ends the run on every rank, with the
// reason of the lowest rank that asked.
StopDecider::Stop StopDecider::vote(bool after_step) {
  const bool asked = after_step ? requests_.after_step() : requests_.stop_requested();
  const std::vector<double> votes = coordinator_.sum({interrupt_requested() ? 1.0 : 0.0, asked ? 1.0 : 0.0});
  if (votes[0] > 0) return Stop::interrupt;
  if (votes[1] == 0) return Stop::go_on;
  const std::vector<std::int64_t> asked_by = coordinator_.gather(asked ? 1 : 0);
  int from = 0;
  while (from + 1 < coordinator_.world_size() && asked_by[static_cast<std::size_t>(from)] == 0) ++from;
  const std::string shared = coordinator_.text_from(from, asked ? to_json_text(*requests_.request()) : "");
  if (!shared.empty()) requests_.agreed(stop_request_from_json_text(shared));  // rank `from` asked
  return Stop::end_run;
}

bool StopDecider::weights_finite() const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  for (const at::Tensor& p : components_.model->parameters()) finite.push_back(at::isfinite(p).all());
  return finite.empty() || at::stack(finite).all().item<bool>();
}

bool StopDecider::weights_good() { return !ledger_.first_nonfinite_loss_step() && weights_finite(); }

void StopDecider::check_loss_finite() {
  if (!options_.stop_on_nonfinite_loss) return;
  const std::optional<std::int64_t> step = ledger_.first_nonfinite_loss_step();
  if (!step) return;
  throw runtime_error("the training loss became inf or NaN at step " + std::to_string(*step) + " (epoch " +
                          std::to_string(state_.epoch + 1) + "); the weights are no longer usable, so training " +
                          "stopped and " + newest_good_checkpoint_("it"),
                      "lower optimizer.lr, clip gradients (trainer.clip_grad_norm), or use a loss-scaling precision "
                      "policy; trainer.stop_on_nonfinite_loss=false trains on regardless");
}

// The loss watch sees applied steps only. A step applied with gradients that were not
// finite (a loss scale of 0 turns them into inf * 0 = NaN after the policy's finite check)
// breaks the weights with every loss finite, then the policy skips every later step: the
// weights themselves are checked once per epoch, before its checkpoint.
void StopDecider::check_weights_finite() const {
  if (!options_.stop_on_nonfinite_loss || weights_finite()) return;
  throw runtime_error("the weights hold inf or NaN after epoch " + std::to_string(state_.epoch + 1) +
                          " although every applied step's loss was finite; training stopped and " +
                          newest_good_checkpoint_("them"),
                      "a step was applied with non-finite gradients: check the precision policy's options (a loss "
                      "scale near 0 or float32's limits) and optimizer.lr; trainer.stop_on_nonfinite_loss=false "
                      "trains on regardless");
}

}  // namespace mixt
