// mixt/helpers/float8.h — float8 linear layers with per-tensor scales, as torchao's float8
// training computes them (torchao/float8/float8_linear.py, recipe "tensorwise"), for a
// precision policy to install on a model's linear layers (mixt/helpers/linear.h).
//
// The three matmuls of a linear layer run in float8 through at::_scaled_mm:
//   output      = input(e4m3)       @ weight^T(e4m3)   (fast accumulation, as torchao)
//   grad_input  = grad_output(e5m2) @ weight(e4m3)
//   grad_weight = grad_output^T(e5m2) @ input(e4m3)
// each operand cast with its own scale (scale_for_float8), the results in the input's
// dtype, the bias added after the matmul in that dtype. Under autocast the input is first
// cast to the autocast dtype of its device (torchao does this for CUDA's autocast only).
// The forward's float8 casts of input and weight are what the backward uses (torchao casts
// the same tensors again, with the same scales: the same numbers, twice the casts and
// high-precision copies kept for backward).
//
// A recipe of your own (another scale rule, delayed scaling) is a LinearFunction whose
// forward chooses the scales and calls float8_linear(input, weight, bias, scales).
//
// A Float8CastObserver sees each cast float8_linear() makes, with the scale it casts with
// (mixt diagnose counts what underflows and saturates, whatever the recipe's scale rule).
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "mixt/helpers/linear.h"

namespace mixt {

// torchao's amax_to_scale: finfo(dtype).max / max(amax, 1e-12), in float64, then float32.
at::Tensor scale_for_float8(const at::Tensor& amax, at::ScalarType float8_dtype);

// torchao's cast: (x in float32) * scale, clamped to +-finfo(dtype).max (LibTorch 2.11's
// cast does not saturate), then cast to dtype. Keeps x's strides.
at::Tensor cast_to_float8(const at::Tensor& x, const at::Tensor& scale, at::ScalarType float8_dtype);

// The scales one call of float8_linear() casts with: float32 scalars, each undefined for
// dynamic per-tensor scaling (scale_for_float8(max |x|) of the tensor about to be cast:
// torchao's tensorwise recipe). A policy with delayed scaling passes the scales its amax
// history gives, and a grad_output_amax scalar (float32) that the backward raises to
// max |grad_output| (the forward's amaxes it can take itself, from input and weight).
struct Float8LinearScales {
  at::Tensor input, weight, grad_output;
  at::Tensor grad_output_amax;
};

// input @ weight^T + bias with the three matmuls in float8 (above); differentiable in
// input, weight and bias.
at::Tensor float8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const Float8LinearScales& scales = {});

// The operands float8_linear() casts: input and weight in the forward (e4m3), the output
// gradient in the backward (e5m2).
enum class Float8Operand { input, weight, grad_output };

// Sees the casts of float8_linear(): `x` the high-precision operand (2-D, the weight
// transposed), `scale` the float32 scalar it is multiplied by before the clamp and the cast
// to `float8_dtype`. Called before the cast, on the thread that makes it.
class Float8CastObserver {
 public:
  virtual ~Float8CastObserver();
  virtual void observe(Float8Operand operand, const at::Tensor& x, const at::Tensor& scale,
                       at::ScalarType float8_dtype) = 0;
};

// While a scope lives, the float8_linear() calls of this thread report their casts to
// `observer` (the scope before it is restored on exit); a call's backward reports to the
// observer its forward saw, which it keeps alive until then. Without a scope: no cost.
class Float8CastObserverScope {
 public:
  explicit Float8CastObserverScope(std::shared_ptr<Float8CastObserver> observer);
  ~Float8CastObserverScope();
  Float8CastObserverScope(const Float8CastObserverScope&) = delete;
  Float8CastObserverScope& operator=(const Float8CastObserverScope&) = delete;

 private:
  std::shared_ptr<Float8CastObserver> previous_;
};

// The LinearFunction of torchao's "tensorwise" recipe.
class Float8TensorwiseLinear : public LinearFunction {
 public:
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override;
};

}  // namespace mixt
