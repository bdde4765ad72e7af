// What a model is fed, in training, evaluation and the blank batch alike: a batch's inputs
// on the run's device, NHWC when the model was laid out so (trainer.channels_last, 4-D
// inputs only), then as the precision policy prepares them.
#pragma once

#include <ATen/ATen.h>

#include "assembly/components.h"

namespace mixt {

inline at::Tensor model_input(const Components& components, const at::Tensor& inputs) {
  at::Tensor moved = inputs.to(components.device, /*non_blocking=*/true);
  if (components.channels_last && moved.dim() == 4) moved = moved.contiguous(at::MemoryFormat::ChannelsLast);
  return components.precision->prepare_input(moved);
}

}  // namespace mixt
