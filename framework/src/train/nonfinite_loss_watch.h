// Notices the first optimizer step whose training loss was inf or NaN without reading the
// loss on the host every step (on a GPU that would synchronise every step): the step number
// is kept next to the loss, on its device, and read only when asked, which the trainer does
// where it reads the loss anyway (log steps), at every epoch's end and before any checkpoint.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace mixt {

class NonFiniteLossWatch {
 public:
  // A step's loss still on its device: a few scalar kernels, no synchronisation.
  void observe(const at::Tensor& loss, std::int64_t step);
  // The same for a step whose outcome is decided on the device: `skipped` is the step's
  // float32 flag there (1: skipped), and a skipped step's loss is not watched.
  void observe_unless_skipped(const at::Tensor& loss, const at::Tensor& skipped, std::int64_t step);
  // A loss already on the host (data parallel: the mean over ranks, known every step).
  void observe(double loss, std::int64_t step);
  // The first step observed with a non-finite loss, if any (reads the device once).
  std::optional<std::int64_t> first_step() const;

 private:
  at::Tensor first_step_on_device_;  // int64 scalar, -1 while every loss was finite
  std::optional<std::int64_t> first_step_on_host_;
};

}  // namespace mixt
