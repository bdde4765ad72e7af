// mixt/train_state.h — where a run stands: what the trainer advances, checkpoints save, and
// callbacks read.
#pragma once

#include <cstdint>

namespace mixt {

struct TrainState {
  std::int64_t epoch = 0;             // the epoch in progress, 0-based (or the next to start)
  std::int64_t epochs = 0;            // trainer.epochs: the total, not how many more
  std::int64_t batches_in_epoch = 0;  // micro-batches of `epoch` already trained on
  std::int64_t global_step = 0;       // optimizer steps attempted since training began
  // Of those, skipped by the precision policy. When the policy decides on the device (a
  // sync-free loss-scaled step) the trainer brings this up to date where it reads the loss
  // anyway: on logged and shown steps (StepEnd::logged), at the epoch's end and in
  // checkpoints; in between it may lag (StepEnd::applied tells about the current step).
  std::int64_t skipped_steps = 0;
};

}  // namespace mixt
