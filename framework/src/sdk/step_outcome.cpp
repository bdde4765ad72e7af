#include "mixt/step_outcome.h"

#include <ATen/ATen.h>

#include "mixt/error.h"

namespace mixt {

StepOutcome StepOutcome::skipped_if(at::Tensor skipped) {
  if (!skipped.defined() || skipped.scalar_type() != at::kFloat || skipped.numel() != 1) {
    throw runtime_error("StepOutcome::skipped_if needs a one-element float32 tensor (1: skipped, 0: applied)",
                        "pass the found-inf flag the optimizer was given (GradScaler makes it so)");
  }
  StepOutcome outcome;
  outcome.applied_.reset();
  outcome.skipped_ = std::move(skipped);
  return outcome;
}

bool StepOutcome::applied() const {
  if (!applied_) applied_ = skipped_.item<float>() == 0.0F;
  return *applied_;
}

at::Tensor StepOutcome::skipped_flag(const at::Device& device) const {
  if (skipped_.defined()) return skipped_.to(device, /*non_blocking=*/true);
  return at::full({}, *applied_ ? 0.0 : 1.0, at::TensorOptions().dtype(at::kFloat).device(device));
}

}  // namespace mixt
