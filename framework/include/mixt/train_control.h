// mixt/train_control.h — what a callback may ask of the training loop: to end the run.
//
// StepEnd::control and EpochEnd::control reach it. A requested stop is a normal end (exit
// 0): the checkpoint of where the run stands, the final evaluation, on_fit_end, and `done:
// ... stopped early by <callback>: <reason>`. In a data-parallel run a request on any rank
// stops every rank at the same point (the ranks agree on it after every step and at every
// epoch's end); callbacks that decide on the evaluation (summed over ranks) ask alike.
#pragma once

#include <string>

namespace mixt {

enum class StopWhen {
  // After the optimizer step in progress: from on_step_end, this step; the checkpoint is
  // then the mid-epoch one (checkpoints/interrupted, which trainer.resume continues from)
  // unless the step was the epoch's last.
  after_step,
  // After this epoch's checkpoint, evaluation and on_epoch_end (asked from on_epoch_end: at once).
  after_evaluation,
};

class TrainControl {
 public:
  virtual ~TrainControl() = default;
  // Asks the trainer to end the run. `reason` ends the run's last line ("val_loss did not
  // improve for 3 epochs"); the callback's name is added. The first request stands; a
  // later after_step one only makes it sooner. A request after the last epoch changes nothing.
  virtual void request_stop(const std::string& reason, StopWhen when = StopWhen::after_evaluation) = 0;
  // Whether this process has a stop request not yet carried out.
  virtual bool stop_requested() const = 0;
};

}  // namespace mixt
