#include "diagnose/float16_range.h"

#include <algorithm>

namespace mixt::diagnose {

void OutputCounts::add(const OutputCounts& other) {
  values += other.values;
  nonfinite += other.nonfinite;
  beyond_float16 += other.beyond_float16;
  below_float16_normal += other.below_float16_normal;
  abs_max = std::max(abs_max, other.abs_max);
}

OutputCounts count_output(const at::Tensor& output) {
  OutputCounts counts;
  if (!output.defined() || !output.is_floating_point() || output.numel() == 0) return counts;
  at::NoGradGuard no_grad;
  const at::Tensor magnitude = output.detach().abs().to(at::kFloat);
  const at::Tensor finite = at::isfinite(magnitude);
  const at::Tensor finite_magnitude = at::where(finite, magnitude, at::zeros({}, magnitude.options()));
  // One read for all four: stacked on the device.
  const at::Tensor stacked =
      at::stack({finite.logical_not().sum().to(at::kDouble), finite_magnitude.gt(kFloat16Max).sum().to(at::kDouble),
                 (finite_magnitude.gt(0) & finite_magnitude.lt(kFloat16SmallestNormal)).sum().to(at::kDouble),
                 finite_magnitude.max().to(at::kDouble)})
          .cpu();
  const double* v = stacked.data_ptr<double>();
  counts.values = output.numel();
  counts.nonfinite = static_cast<std::int64_t>(v[0]);
  counts.beyond_float16 = static_cast<std::int64_t>(v[1]);
  counts.below_float16_normal = static_cast<std::int64_t>(v[2]);
  counts.abs_max = v[3];
  return counts;
}

UnderflowCounts count_flushed_in_float16(const at::Tensor& gradient, double scale) {
  UnderflowCounts counts;
  if (!gradient.defined() || gradient.numel() == 0) return counts;
  at::NoGradGuard no_grad;
  const at::Tensor g = gradient.detach().to(at::kFloat);
  const at::Tensor nonzero = at::isfinite(g) & g.ne(0);
  const at::Tensor flushed = nonzero & g.mul(scale).to(at::kHalf).eq(0);
  const at::Tensor stacked = at::stack({nonzero.sum(), flushed.sum()}).cpu();  // one read for both
  counts.nonzero = stacked.data_ptr<std::int64_t>()[0];
  counts.flushed = stacked.data_ptr<std::int64_t>()[1];
  return counts;
}

}  // namespace mixt::diagnose
