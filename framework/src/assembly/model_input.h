// What a model is fed, in training, evaluation and the blank batch alike: a batch's inputs
// on the run's device, NHWC when the model was laid out so (trainer.channels_last, 4-D
// inputs only), then as the precision policy prepares them. And the blank batch itself: the
// one forward pass the build's checks, the routing probe and `mixt check` make on zeros.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "assembly/components.h"
#include "assembly/run_facts.h"

namespace mixt {

inline at::Tensor model_input(const Components& components, const RunFacts& facts, const at::Tensor& inputs) {
  at::Tensor moved = inputs.to(facts.device, /*non_blocking=*/true);
  if (facts.channels_last && moved.dim() == 4) moved = moved.contiguous(at::MemoryFormat::ChannelsLast);
  return components.precision->prepare_input(moved);
}

// One forward pass on `batch` blank samples of `sample_shape` (the task's: zeros, token 0), as training runs the model
// (after the policy's setup, under its autocast, fed through model_input) but in eval mode
// and without gradients; the model's mode is restored after. Two samples by default: batch
// norm in training mode needs more than one.
inline at::Tensor forward_blank_batch(const Components& components, const RunFacts& facts,
                                      std::vector<std::int64_t> sample_shape, std::int64_t batch = 2) {
  sample_shape.insert(sample_shape.begin(), batch);
  at::NoGradGuard no_grad;
  AutocastScope scope = components.precision->autocast(facts.device.type());
  const bool training = components.model->is_training();
  components.model->eval();
  const at::Tensor blank = components.task->blank_inputs(sample_shape, facts.device);
  at::Tensor out = components.model->forward(model_input(components, facts, blank));
  components.model->train(training);
  return out;
}

}  // namespace mixt
