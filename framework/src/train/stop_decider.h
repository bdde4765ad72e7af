// Whether and how the run stops, decided in one place and agreed by every rank: after each
// step's callbacks and at each epoch's end, for a signal (exit 130, after the checkpoint
// that makes `trainer.resume` lose nothing), for a callback's stop request (a normal end),
// and for weights gone bad (inf/NaN: a runtime failure, exit 1, before any checkpoint
// holds them).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "assembly/components.h"
#include "assembly/trainer_options.h"
#include "common/coordinator.h"
#include "mixt/train_state.h"
#include "train/step_ledger.h"
#include "train/stop_control.h"

namespace mixt {

class StopDecider {
 public:
  enum class Stop { go_on, end_run, interrupt };

  // `newest_good_checkpoint`: the wording of which checkpoint still holds good weights
  // (RecoveryCheckpoints::newest_good_checkpoint).
  StopDecider(Components& components, const TrainerOptions& options, const TrainState& state, StepLedger& ledger,
              const Coordinator& coordinator, std::function<std::string(const std::string&)> newest_good_checkpoint);

  // What callbacks ask through (StepEnd::control, EpochEnd::control); `calling` names the
  // callback a request comes from.
  TrainControl& control() { return requests_; }
  void calling(const std::string& callback) { requests_.calling(callback); }
  // The request every rank reports, once agreed.
  const std::optional<StopRequest>& request() const { return requests_.request(); }

  // After each step's callbacks (one small all-reduce in a data-parallel run); `loss_read`:
  // the loss is on the host already, so it is checked for inf/NaN too.
  Stop after_step(bool loss_read);
  // At an epoch's end, after its checkpoint, evaluation and on_epoch_end.
  Stop at_epoch_end();

  // Throws when an applied step's loss was inf or NaN (trainer.stop_on_nonfinite_loss).
  void check_loss_finite();
  // Throws when the weights themselves hold inf or NaN (a step applied with non-finite
  // gradients leaves every loss finite): once per epoch and before an interrupt's checkpoint.
  void check_weights_finite() const;
  // Neither a non-finite loss nor a non-finite weight: what may be saved after a failure.
  bool weights_good();

 private:
  bool weights_finite() const;
  // The ranks' decision; `after_step`: only after_step requests count.
  Stop vote(bool after_step);

  Components& components_;
  const TrainerOptions& options_;
  const TrainState& state_;
  StepLedger& ledger_;
  const Coordinator& coordinator_;
  std::function<std::string(const std::string&)> newest_good_checkpoint_;
  StopControl requests_;
};

}  // namespace mixt
