// What the training loop keeps on the device about its steps, for the host to read only
// where it reads the loss anyway: how many steps the precision policy skipped (into
// TrainState::skipped_steps) and the first applied step whose loss was inf or NaN. Recording
// a step launches a few scalar kernels and reads nothing; settle() is the one read, both
// values in one device-to-host copy, and the trainer calls it at its read points (logged
// steps, an epoch's end, and through hooks before a checkpoint or a progress line).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "mixt/step_outcome.h"

namespace mixt {

class StepLedger {
 public:
  // `skipped_steps`: the host count kept up to date (TrainState::skipped_steps).
  explicit StepLedger(std::int64_t& skipped_steps) : skipped_steps_(skipped_steps) {}

  // After an optimizer step: whether the policy applied it, decided on the host or on the
  // device (`device`: where a device flag is summed).
  void count(const StepOutcome& applied, const at::Device& device);
  // The step's loss (data parallel: the mean over ranks; `loss_read`: read to the host for
  // that), watched unless the policy skipped the step: a skipped step's inf/NaN loss is a
  // loss scaler backing off, an applied one has put inf/NaN into the weights.
  void watch_loss(const at::Tensor& loss, bool loss_read, const StepOutcome& applied, std::int64_t step);

  // Reads what is pending on the device into the host values: nothing when nothing is.
  void settle();
  // The first step watched with a non-finite loss, if any (settles first).
  std::optional<std::int64_t> first_nonfinite_loss_step();

 private:
  std::int64_t& skipped_steps_;
  at::Tensor skipped_on_device_;          // float32 sum of the device flags since the last settle()
  at::Tensor first_nonfinite_on_device_;  // int64 scalar, -1 while every watched loss was finite
  bool watched_since_settled_ = false;
  std::optional<std::int64_t> first_nonfinite_;
};

}  // namespace mixt
