// Where values leave float16's range: the counts `mixt diagnose` reports for module outputs
// and gradients. Each is computed on the tensor's device and read once per step.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace mixt::diagnose {

inline constexpr double kFloat16Max = 65504.0;                     // largest finite float16
inline constexpr double kFloat16SmallestNormal = 6.103515625e-05;  // 2^-14

// A forward output's values: how many, how many are inf/NaN, how many finite ones lie
// beyond float16's largest value, how many non-zero ones below its smallest normal (they
// lose precision as subnormals, or vanish), and the largest finite magnitude.
struct OutputCounts {
  std::int64_t values = 0;
  std::int64_t nonfinite = 0;
  std::int64_t beyond_float16 = 0;
  std::int64_t below_float16_normal = 0;
  double abs_max = 0;

  void add(const OutputCounts& other);
};
OutputCounts count_output(const at::Tensor& output);

// A gradient's finite non-zero values, and how many of them become zero in float16 once
// multiplied by the loss scale (`scale`): what float16 backward would lose at that scale.
struct UnderflowCounts {
  std::int64_t nonzero = 0;
  std::int64_t flushed = 0;

  void add(const UnderflowCounts& other) {
    nonzero += other.nonzero;
    flushed += other.flushed;
  }
  double fraction() const { return nonzero == 0 ? 0.0 : static_cast<double>(flushed) / static_cast<double>(nonzero); }
};
UnderflowCounts count_flushed_in_float16(const at::Tensor& gradient, double scale);

}  // namespace mixt::diagnose
