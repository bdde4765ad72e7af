// mixt/step_outcome.h — whether an optimizer step was applied or skipped, decided on the
// host or on the device.
//
// A loss scaler that hands found_inf to a fused optimizer (Optimizer::step_scaled) knows
// whether the step ran only on the device. Reading that on the host would wait for the
// device every step, so the outcome keeps the flag and reads it only when asked:
//
//   StepOutcome outcome = scaler.step(optimizer);   // no host read
//   if (outcome.applied()) scheduler.step();        // one read here (cached after)
//
// `return true;` makes a host outcome. The way back to bool is explicit (applied(), or `if
// (outcome)`), so no `bool b = outcome;` waits on the device unseen.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace mixt {

class StepOutcome {
 public:
  StepOutcome(bool applied = true) : applied_(applied) {}  // NOLINT: implicit by design
  // `skipped`: a float32 scalar on the device, 1 when the step was skipped, 0 when applied.
  // Throws mixt::Error when it is undefined, not float32, or not a single element.
  static StepOutcome skipped_if(at::Tensor skipped);

  // Whether the step was applied: for a device outcome, one host read (a synchronisation on a
  // GPU) the first time, cached for the copy it was asked of.
  bool applied() const;
  explicit operator bool() const { return applied(); }
  // Whether applied() costs nothing: decided on the host, or already read.
  bool known() const { return applied_.has_value(); }
  // The decision as a float32 scalar (1: skipped) on `device`, with no host read: the device
  // flag itself (copied there if it lives elsewhere), or a new scalar for a host decision.
  at::Tensor skipped_flag(const at::Device& device) const;

 private:
  mutable std::optional<bool> applied_;
  at::Tensor skipped_;  // defined for a device outcome
};

}  // namespace mixt
