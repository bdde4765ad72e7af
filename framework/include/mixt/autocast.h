// mixt/autocast.h — RAII autocast regions, mirroring Python's `torch.autocast`.
//
//   { mixt::AutocastScope scope(at::kCUDA, at::kHalf);   // like `with torch.autocast("cuda", torch.float16):`
//     out = model->forward(x); }
//   { mixt::FullPrecisionScope fp32(at::kCUDA);          // like `with torch.autocast("cuda", enabled=False):`
//     ... numerically sensitive code ... }
//
// Entering saves the device's autocast state (enabled, dtype, cache) and sets the new one
// and bumps the nesting counter; leaving restores the saved state and, when the outermost
// region exits, clears the cast cache — exactly what torch.autocast.__enter__/__exit__ do.
#pragma once

#include <ATen/ATen.h>

namespace mixt {

class AutocastScope {
 public:
  // A scope that changes nothing (what a full-precision policy returns).
  AutocastScope() = default;
  AutocastScope(at::DeviceType device, at::ScalarType dtype, bool enabled = true,
                bool cache_enabled = true);
  ~AutocastScope();

  AutocastScope(AutocastScope&& other) noexcept;
  AutocastScope& operator=(AutocastScope&&) = delete;
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  at::DeviceType device_ = at::kCPU;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
  bool previous_cache_enabled_ = true;
};

// Turns autocast off for a region inside an autocast scope (`autocast(enabled=False)`).
class FullPrecisionScope {
 public:
  explicit FullPrecisionScope(at::DeviceType device);

 private:
  AutocastScope scope_;
};

}  // namespace mixt
