// Counts the steps the precision policy skipped without a host read per step: an outcome
// decided on the host adds to the host count at once; one decided on the device adds its
// flag to a device sum, which settle() reads where the trainer reads the loss anyway (logged
// steps, the epoch's end, before a checkpoint).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "mixt/step_outcome.h"

namespace mixt {

class SkippedStepCount {
 public:
  // `count`: the host count kept up to date (TrainState::skipped_steps).
  explicit SkippedStepCount(std::int64_t& count) : count_(count) {}
  void add(const StepOutcome& outcome, const at::Device& device);
  // What the device holds into the host count: one read when a device outcome is pending.
  void settle();

 private:
  std::int64_t& count_;
  at::Tensor pending_;  // float32 sum of the device flags since the last settle(); undefined when none
};

}  // namespace mixt
