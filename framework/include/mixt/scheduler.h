// mixt/scheduler.h — the learning-rate scheduler interface.
#pragma once

#include <cstdint>

#include "mixt/optimizer.h"

namespace mixt {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Called after every optimizer step that was applied (a step a precision policy
  // skipped does not advance the schedule). Sets the optimizer's learning rate.
  virtual void step() = 0;
  virtual void save(torch::serialize::OutputArchive& archive) = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

struct SchedulerContext {
  Optimizer* optimizer = nullptr;      // the optimizer whose learning rate is scheduled
  // Optimizer steps in one epoch: the epoch's batches over trainer.accumulate (rounded up),
  // at most trainer.max_steps_per_epoch. epochs * steps_per_epoch is the run's length.
  std::int64_t steps_per_epoch = 0;
  std::int64_t epochs = 0;             // epochs in the whole run
};

}  // namespace mixt
