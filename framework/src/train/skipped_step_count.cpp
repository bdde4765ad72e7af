#include "train/skipped_step_count.h"

#include <ATen/ATen.h>

namespace mixt {

void SkippedStepCount::add(const StepOutcome& outcome, const at::Device& device) {
  if (outcome.known()) {
    count_ += outcome.applied() ? 0 : 1;
    return;
  }
  const at::Tensor flag = outcome.skipped_flag(device);
  pending_ = pending_.defined() ? pending_ + flag : flag.clone();
}

void SkippedStepCount::settle() {
  if (!pending_.defined()) return;
  // float32 counts exactly up to 2^24 steps between two settle()s: a log_every far beyond any recipe's.
  count_ += static_cast<std::int64_t>(pending_.item<float>());
  pending_ = at::Tensor();
}

}  // namespace mixt
