#include "mixt/autocast.h"

#include <ATen/autocast_mode.h>

namespace mixt {

// Mirrors torch.autocast.__enter__ (torch/amp/autocast_mode.py).
AutocastScope::AutocastScope(at::DeviceType device, at::ScalarType dtype, bool enabled, bool cache_enabled)
    : active_(true),
      device_(device),
      previous_enabled_(at::autocast::is_autocast_enabled(device)),
      previous_dtype_(at::autocast::get_autocast_dtype(device)),
      previous_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(cache_enabled);
}

// Mirrors torch.autocast.__exit__: the cast cache lives as long as the outermost region.
AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

AutocastScope::AutocastScope(AutocastScope&& other) noexcept
    : active_(other.active_),
      device_(other.device_),
      previous_enabled_(other.previous_enabled_),
      previous_dtype_(other.previous_dtype_),
      previous_cache_enabled_(other.previous_cache_enabled_) {
  other.active_ = false;
}

FullPrecisionScope::FullPrecisionScope(at::DeviceType device)
    : scope_(device, at::autocast::get_autocast_dtype(device), /*enabled=*/false,
             at::autocast::is_autocast_cache_enabled()) {}

}  // namespace mixt
