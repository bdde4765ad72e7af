// Top-1 and top-k counts as torchvision's classification reference computes accuracy
// (references/classification/utils.py `accuracy`): one topk(k, largest, sorted) per batch,
// a sample counts for top-j when its label is among the first j indices.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

namespace mixt {

// 5, or the class count when there are fewer classes.
inline std::int64_t top_k_for(std::int64_t classes) { return std::min<std::int64_t>(5, classes); }

// [samples right at top-1, samples right at top-k] for (N, C) logits and N labels, on the
// logits' device (nothing is read on the host).
inline at::Tensor count_top1_and_top_k(const at::Tensor& logits, const at::Tensor& targets, std::int64_t k) {
  const at::Tensor predicted = std::get<1>(logits.topk(k, /*dim=*/1, /*largest=*/true, /*sorted=*/true)).t();
  const at::Tensor correct = predicted.eq(targets.view({1, -1}).expand_as(predicted));
  return at::stack({correct.slice(0, 0, 1).sum(), correct.sum()});
}

}  // namespace mixt
