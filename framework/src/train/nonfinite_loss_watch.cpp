#include "train/nonfinite_loss_watch.h"

#include <cmath>

namespace mixt {

void NonFiniteLossWatch::observe(const at::Tensor& loss, std::int64_t step) {
  if (!first_step_on_device_.defined()) {
    first_step_on_device_ = at::full({}, -1, loss.options().dtype(at::kLong));
  }
  first_step_on_device_.masked_fill_(at::isfinite(loss).logical_not().logical_and(first_step_on_device_.lt(0)), step);
}

void NonFiniteLossWatch::observe_unless_skipped(const at::Tensor& loss, const at::Tensor& skipped, std::int64_t step) {
  if (!first_step_on_device_.defined()) {
    first_step_on_device_ = at::full({}, -1, loss.options().dtype(at::kLong));
  }
  const at::Tensor watched = at::isfinite(loss).logical_not().logical_and(skipped.eq(0));
  first_step_on_device_.masked_fill_(watched.logical_and(first_step_on_device_.lt(0)), step);
}

void NonFiniteLossWatch::observe(double loss, std::int64_t step) {
  if (!std::isfinite(loss) && !first_step_on_host_) first_step_on_host_ = step;
}

std::optional<std::int64_t> NonFiniteLossWatch::first_step() const {
  if (first_step_on_host_) return first_step_on_host_;
  if (!first_step_on_device_.defined()) return std::nullopt;
  const auto step = first_step_on_device_.item<std::int64_t>();
  return step < 0 ? std::nullopt : std::optional<std::int64_t>(step);
}

}  // namespace mixt
