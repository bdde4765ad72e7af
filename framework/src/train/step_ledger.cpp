#include "train/step_ledger.h"

#include <vector>

namespace mixt {

void StepLedger::count(const StepOutcome& applied, const at::Device& device) {
  if (applied.known()) {
    skipped_steps_ += applied.applied() ? 0 : 1;
    return;
  }
  const at::Tensor flag = applied.skipped_flag(device);
  skipped_on_device_ = skipped_on_device_.defined() ? skipped_on_device_ + flag : flag.clone();
}

void StepLedger::watch_loss(const at::Tensor& loss, bool loss_read, const StepOutcome& applied, std::int64_t step) {
  if (first_nonfinite_) return;  // the first one is what the trainer reports
  // A device outcome is combined with the loss where they are, with no read; a loss read to
  // the host already (agreed over ranks) reads the outcome too.
  const bool combine_on_device = !applied.known() && !loss_read;
  if (!combine_on_device && !applied.applied()) return;
  if (!first_nonfinite_on_device_.defined()) {
    first_nonfinite_on_device_ = at::full({}, -1, loss.options().dtype(at::kLong));
  }
  at::Tensor watched = at::isfinite(loss).logical_not();
  if (combine_on_device) watched = watched.logical_and(applied.skipped_flag(loss.device()).eq(0));
  first_nonfinite_on_device_.masked_fill_(watched.logical_and(first_nonfinite_on_device_.lt(0)), step);
  watched_since_settled_ = true;
}

void StepLedger::settle() {
  std::vector<at::Tensor> pending;
  if (skipped_on_device_.defined()) pending.push_back(skipped_on_device_.to(at::kDouble));
  if (watched_since_settled_) pending.push_back(first_nonfinite_on_device_.to(at::kDouble));
  if (pending.empty()) return;
  // One copy when both are on one device (the usual case; a data-parallel loss agreed on the
  // host is the other). Doubles hold both exactly: float32 flag sums up to 2^24 steps
  // between two settles, step numbers up to 2^53.
  std::vector<double> values;
  if (pending.size() == 2 && pending[0].device() == pending[1].device()) {
    const at::Tensor both = at::stack(pending).cpu();
    values = {both[0].item<double>(), both[1].item<double>()};
  } else {
    for (const at::Tensor& value : pending) values.push_back(value.item<double>());
  }
  std::size_t next = 0;
  if (skipped_on_device_.defined()) {
    skipped_steps_ += static_cast<std::int64_t>(values[next++]);
    skipped_on_device_ = at::Tensor();
  }
  if (watched_since_settled_) {
    const auto step = static_cast<std::int64_t>(values[next]);
    if (step >= 0) first_nonfinite_ = step;
    watched_since_settled_ = false;
  }
}

std::optional<std::int64_t> StepLedger::first_nonfinite_loss_step() {
  settle();
  return first_nonfinite_;
}

}  // namespace mixt
