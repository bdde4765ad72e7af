// What a float8 cast loses: the counts `mixt diagnose` reports for each operand of a float8
// linear layer (mixt/helpers/float8.h), under the scale the recipe cast it with.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace mixt::diagnose {

// Of a tensor's finite non-zero values, how many become 0 in float8 once scaled (e4m3's
// smallest subnormal is 2^-9, so |x·scale| ≤ 2^-10 rounds to 0; e5m2's 2^-16, 2^-17) and how
// many the cast's clamp cuts: |x·scale| beyond the largest value by more than rounding would
// give (448 + 16 for e4m3, 57344 + 4096 for e5m2: half a step above the largest value).
struct Float8CastCounts {
  std::int64_t values = 0;
  std::int64_t nonzero = 0;
  std::int64_t underflow = 0;
  std::int64_t saturated = 0;

  void add(const Float8CastCounts& other);
  double underflow_fraction() const { return share(underflow); }
  double saturated_fraction() const { return share(saturated); }

 private:
  double share(std::int64_t part) const {
    return nonzero == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(nonzero);
  }
};

// The largest |x·scale| the cast to `float8_dtype` rounds rather than clamps.
double float8_saturation_bound(at::ScalarType float8_dtype);

// Counted on x's device, read once.
Float8CastCounts count_float8_cast(const at::Tensor& x, const at::Tensor& scale, at::ScalarType float8_dtype);

}  // namespace mixt::diagnose
