// The confusion matrix of a classifier's evaluation and the per-class accuracy it gives:
// row = the label, column = the top-1 prediction (the first of the top-k that accuracy.h
// counts, so the diagonal sums to the top-1 count).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace mixt {

// [classes, classes] counts (int64, on the logits' device) of (N, classes) logits and N labels.
inline at::Tensor confusion_counts(const at::Tensor& logits, const at::Tensor& targets, std::int64_t classes) {
  const at::Tensor predicted = std::get<1>(logits.topk(1, /*dim=*/1, /*largest=*/true, /*sorted=*/true)).view({-1});
  const at::Tensor cells = targets.to(at::kLong).view({-1}) * classes + predicted;
  return at::bincount(cells, /*weights=*/{}, /*minlength=*/classes * classes).view({classes, classes});
}

// Row i's diagonal over its sum: the share of class i's samples predicted as class i (NaN
// for a class without samples).
inline std::vector<double> per_class_accuracy(const at::Tensor& confusion) {
  const at::Tensor counts = confusion.to(at::kCPU, at::kLong).contiguous();
  const std::int64_t classes = counts.size(0);
  const std::int64_t* cell = counts.data_ptr<std::int64_t>();
  std::vector<double> accuracy(static_cast<std::size_t>(classes), NAN);
  for (std::int64_t i = 0; i < classes; ++i) {
    std::int64_t samples = 0;
    for (std::int64_t j = 0; j < classes; ++j) samples += cell[i * classes + j];
    if (samples > 0) accuracy[i] = static_cast<double>(cell[i * classes + i]) / static_cast<double>(samples);
  }
  return accuracy;
}

}  // namespace mixt
