// A model's loss and its task's figures over a dataset: the evaluation after each epoch and
// `mixt evaluate`'s. In a data-parallel run each rank scores its shard and the sums are
// taken over ranks, the padding of a shard (other ranks' samples again) not counted.
#pragma once

#include <ATen/ATen.h>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "common/coordinator.h"
#include "mixt/callback.h"

namespace mixt {

class Evaluator {
 public:
  // `coordinator`: the run's other processes (SingleProcess for one).
  Evaluator(Components& components, const RunFacts& facts, const Coordinator& coordinator)
      : components_(components), facts_(facts), coordinator_(coordinator) {}

  // The model's current weights on `dataset`, in eval mode and under the policy's autocast.
  // `confusion`, when given, receives the task's [classes, classes] confusion matrix (int64,
  // on the CPU, summed over ranks), left undefined when the task keeps none. A Ctrl-C in a single process
  // returns an Evaluation marked interrupted.
  Evaluation evaluate(Dataset& dataset, at::Tensor* confusion = nullptr) const;

 private:
  Components& components_;
  const RunFacts& facts_;
  const Coordinator& coordinator_;
};

}  // namespace mixt
