#include "diagnose/float8_range.h"

#include <c10/util/Exception.h>

#include "mixt/helpers/float8.h"

namespace mixt::diagnose {

void Float8CastCounts::add(const Float8CastCounts& other) {
  values += other.values;
  nonzero += other.nonzero;
  underflow += other.underflow;
  saturated += other.saturated;
}

double float8_saturation_bound(at::ScalarType float8_dtype) {
  switch (float8_dtype) {  // the largest value plus half the step below it
    case at::kFloat8_e4m3fn:
      return 448.0 + 16.0;
    case at::kFloat8_e5m2:
      return 57344.0 + 4096.0;
    case at::kFloat8_e4m3fnuz:
      return 240.0 + 8.0;
    case at::kFloat8_e5m2fnuz:
      return 57344.0 + 4096.0;
    default:
      TORCH_CHECK(false, "not a float8 dtype: ", float8_dtype);
  }
}

Float8CastCounts count_float8_cast(const at::Tensor& x, const at::Tensor& scale, at::ScalarType float8_dtype) {
  Float8CastCounts counts;
  if (!x.defined() || x.numel() == 0) return counts;
  at::NoGradGuard no_grad;
  const at::Tensor v = x.detach().to(at::kFloat);
  const at::Tensor nonzero = at::isfinite(v) & v.ne(0);
  // The cast the recipe makes (clamped, then float8), so rounding to zero is float8's own.
  const at::Tensor underflow = nonzero & cast_to_float8(v, scale, float8_dtype).eq(0);
  const at::Tensor saturated = nonzero & (v * scale).abs().gt(float8_saturation_bound(float8_dtype));
  const at::Tensor stacked = at::stack({nonzero.sum(), underflow.sum(), saturated.sum()}).cpu();  // one read
  counts.values = x.numel();
  counts.nonzero = stacked.data_ptr<std::int64_t>()[0];
  counts.underflow = stacked.data_ptr<std::int64_t>()[1];
  counts.saturated = stacked.data_ptr<std::int64_t>()[2];
  return counts;
}

}  // namespace mixt::diagnose
