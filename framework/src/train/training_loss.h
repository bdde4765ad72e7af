// The training loss of one micro-batch: the model's forward pass under the precision
// policy's autocast and the task's loss (mixt/task.h), divided by trainer.accumulate. A failing forward pass is reported with its epoch, step and batch
// shape, and what to change for the failures a recipe causes.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "assembly/components.h"

namespace mixt {

class TrainingLoss {
 public:
  TrainingLoss(Components& components, std::int64_t accumulate) : components_(components), accumulate_(accumulate) {}

  // `inputs` as model_input() made them; `epoch` and `step` (0-based) name a failure.
  at::Tensor operator()(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t epoch,
                        std::int64_t step) const;

 private:
  Components& components_;
  std::int64_t accumulate_;
};

}  // namespace mixt
