// Stochastic rounding of float32 to bfloat16, for my_master.cpp (and its unit test,
// tests/examples/stochastic_rounding_test.cpp). bfloat16 is float32's upper 16 bits: adding a
// uniform random integer in [0, 2^16) to the low 16 bits and truncating them rounds up
// (away from zero) with probability (distance to the lower neighbour) / (gap between the
// neighbours), so the rounding is unbiased: E[round(x)] = x. Round-to-nearest instead loses
// every update smaller than half a gap, which is what float32 masters are kept for.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace my_master {

// One uniform integer in [0, 2^16) per element of `like`, drawn from `generator` (a CPU
// generator: the same seed gives the same bits on any device), moved to `like`'s device.
inline at::Tensor random_rounding_bits(const at::Tensor& like, const at::Generator& generator) {
  return at::randint(0, 1 << 16, like.sizes(), generator, at::TensorOptions().dtype(at::kInt)).to(like.device());
}

// `x` (float32) rounded to bfloat16, up where its low 16 bits plus `bits` carry into bit 16.
inline at::Tensor stochastic_round_to_bf16(const at::Tensor& x, const at::Tensor& bits) {
  const at::Tensor pattern = x.contiguous().view(at::kInt);  // the float32 bit pattern
  const at::Tensor truncated = (pattern + bits).bitwise_and(static_cast<std::int32_t>(0xFFFF0000u));
  return truncated.view(at::kFloat).to(at::kBFloat16);  // exact: the low 16 bits are zero
}

}  // namespace my_master
