// Shared by the precision policies: checks of the loss-scaler options they read or reject.
#pragma once

#include <mixt/config.h>
#include <mixt/options.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mixt::precision {

// A loss scale is used as a float32 and inverted for unscaling: outside float32's normal
// range it overflows, its inverse does (a LibTorch error at the first step), or it becomes 0
// (inf * 0 = NaN gradients that the finite check, run before the multiplication, lets through).
inline Check<double> in_float32_range() {
  return [](const double& scale) -> std::optional<std::string> {
    if (scale >= std::numeric_limits<float>::min() && scale <= std::numeric_limits<float>::max()) return std::nullopt;
    return "must lie in float32's normal range [1.18e-38, 3.40e+38]";
  };
}

// A check with its own message: `must be > 1 (GradScaler: '...')`.
inline Check<double> holds(bool (*test)(double), std::string message) {
  return [test, message](const double& value) -> std::optional<std::string> {
    if (test(value)) return std::nullopt;
    return message;
  };
}

// Whether the recipe wrote `key`, without making it one of the section's known keys as
// Config::has would: for options a policy rejects, which an unknown key's "known keys"
// hint must not then offer.
inline bool written(const mixt::Config& c, const char* key) {
  const std::vector<std::string> keys = c.keys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace mixt::precision
