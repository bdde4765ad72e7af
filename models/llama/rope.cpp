#include "rope.h"

#include <c10/util/Exception.h>

#include <cmath>

namespace mixt::models::llama {

at::Tensor inverse_frequencies(std::int64_t head_dim, const RopeOptions& o) {
  // 1 / base^(arange(0, dim, 2) / dim); Python's `1.0 / t` is t.reciprocal() * 1.0.
  const at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / head_dim;
  const at::Tensor inv_freq = at::pow(o.theta, exponents).reciprocal();
  if (o.type == "default") return inv_freq;
  TORCH_CHECK(o.type == "llama3", "llama: rope_type '", o.type, "' is not implemented (default, llama3)");
  // _compute_llama3_parameters: long wavelengths divided by factor, short ones kept, the
  // ones between interpolated.
  const double old_context = static_cast<double>(o.original_context);
  const double low_freq_wavelen = old_context / o.low_freq_factor;
  const double high_freq_wavelen = old_context / o.high_freq_factor;
  const at::Tensor wavelen = inv_freq.reciprocal() * (2 * M_PI);  // Python: 2 * math.pi / inv_freq
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / o.factor, inv_freq);
  const at::Tensor smooth =
      (wavelen.reciprocal() * old_context - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / o.factor + smooth * scaled;
  const at::Tensor medium = (wavelen < high_freq_wavelen).logical_not() * (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, scaled);
}

std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions, const at::Tensor& inverse_frequencies,
                                              at::ScalarType dtype) {
  const at::Tensor freqs =
      positions.unsqueeze(-1).to(at::kFloat) * inverse_frequencies.to(positions.device(), at::kFloat);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const std::int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace mixt::models::llama
