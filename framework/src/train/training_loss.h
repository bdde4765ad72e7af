// The training loss of one micro-batch: the model's forward pass under the precision
// policy's autocast and the task's loss (mixt/task.h), divided by trainer.accumulate. When
// the model has a linear head and the task a fused head loss (mixt/linear_head.h), the
// model's features and the task's head_loss() instead: the same loss without the head's
// whole output. A failing forward pass is reported with its epoch, step and batch shape,
// and what to change for the failures a recipe causes.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "mixt/linear_head.h"

namespace mixt {

class TrainingLoss {
 public:
  TrainingLoss(Components& components, const RunFacts& facts, std::int64_t accumulate)
      : components_(components), facts_(facts), accumulate_(accumulate) {}

  // Decides between the fused head loss and the plain one now, while the weights are whole
  // (before sharding: parameters releases the blocks'); else the first step decides.
  void decide_path() const;
  // `inputs` as model_input() made them; `epoch` and `step` (0-based) name a failure.
  at::Tensor operator()(const at::Tensor& inputs, const at::Tensor& targets, std::int64_t epoch,
                        std::int64_t step) const;

 private:
  at::Tensor head_loss(const HeadLoss& task, const at::Tensor& inputs, const at::Tensor& targets) const;

  Components& components_;
  const RunFacts& facts_;
  std::int64_t accumulate_;
  // Decided at the first step, after the policy's setup() has installed its linear functions.
  mutable const HeadLoss* fused_ = nullptr;
  mutable bool fused_decided_ = false;
};

}  // namespace mixt
