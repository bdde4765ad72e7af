#include "mixt/helpers/float8.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace mixt {

Float8CastObserver::~Float8CastObserver() = default;

namespace {

thread_local std::shared_ptr<Float8CastObserver> current_observer;

// The observer a forward saw, kept in its autograd context for the backward.
struct ObserverHolder : torch::CustomClassHolder {
  explicit ObserverHolder(std::shared_ptr<Float8CastObserver> o) : observer(std::move(o)) {}
  std::shared_ptr<Float8CastObserver> observer;
};

// A forward keeps the thread's observer (if any) in its context, for its backward: the
// backward runs on autograd's thread, after the scope has ended.
void keep_observer_for_backward(torch::autograd::AutogradContext* ctx) {
  if (current_observer)
    ctx->saved_data["observer"] = c10::IValue::make_capsule(c10::make_intrusive<ObserverHolder>(current_observer));
}

// The observer a forward saw, for its backward (null when none).
Float8CastObserver* forward_observer(torch::autograd::AutogradContext* ctx) {
  const auto observer = ctx->saved_data.find("observer");
  if (observer == ctx->saved_data.end()) return nullptr;
  return c10::static_intrusive_pointer_cast<ObserverHolder>(observer->second.toCapsule())->observer.get();
}

void report(Float8CastObserver* observer, Float8Operand operand, const at::Tensor& x, const at::Tensor& scale,
            at::ScalarType dtype) {
  if (observer) observer->observe(operand, x, scale, dtype);
}

constexpr at::ScalarType kE4m3 = at::kFloat8_e4m3fn;
constexpr at::ScalarType kE5m2 = at::kFloat8_e5m2;

double float8_max(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat8_e4m3fn: return static_cast<double>(std::numeric_limits<c10::Float8_e4m3fn>::max());
    case at::kFloat8_e5m2: return static_cast<double>(std::numeric_limits<c10::Float8_e5m2>::max());
    case at::kFloat8_e4m3fnuz: return static_cast<double>(std::numeric_limits<c10::Float8_e4m3fnuz>::max());
    case at::kFloat8_e5m2fnuz: return static_cast<double>(std::numeric_limits<c10::Float8_e5m2fnuz>::max());
    default: TORCH_CHECK(false, "not a float8 dtype: ", dtype);
  }
}

at::Tensor dynamic_scale(const at::Tensor& x, at::ScalarType dtype) {
  return scale_for_float8(at::max(at::abs(x)), dtype);
}

// torchao's is_row_major: what _scaled_mm wants of its first operand (the second must be
// column-major); preprocess_addmm copies to get there.
bool row_major(const at::Tensor& t) { return t.stride(0) > t.stride(1) && t.stride(1) == 1; }

// CUDA's _scaled_mm needs the inner dimension a multiple of 16, and the weight gradient's is
// the batch's rows (batch x tokens), which a ragged last batch breaks: zero columns of `a`
// and rows of `b` (zero bits are +0 in every float8 format) add nothing to the product.
void pad_inner_dimension_for_cuda(at::Tensor& a, at::Tensor& b) {
  const std::int64_t rest = a.size(1) % 16;
  if (!a.is_cuda() || rest == 0) return;
  const std::int64_t pad = 16 - rest;
  a = at::constant_pad_nd(a.view(at::kByte), {0, pad}).view(a.scalar_type());
  b = at::constant_pad_nd(b.view(at::kByte), {0, 0, 0, pad}).view(b.scalar_type());
}

// _scaled_mm's own CPU emulation, op for op (aten/src/ATen/native/Blas.cpp): dequantise,
// float32 matmul, round. PyTorch 2.11 takes it on most CPUs, but sends operands of one format
// to oneDNN on a CPU with AMX-INT8, where oneDNN 3.10 has only its reference kernel (about
// 800 times slower): computed here, every CPU gets the same numbers at the emulation's speed.
at::Tensor scaled_mm_emulated_on_cpu(const at::Tensor& a, const at::Tensor& a_inverse, const at::Tensor& b,
                                     const at::Tensor& b_inverse, at::ScalarType out_dtype) {
  const at::Tensor a32 = a.contiguous().to(at::kFloat) * a_inverse;
  const at::Tensor b32 = b.contiguous().to(at::kFloat) * b_inverse;
  return at::matmul(a32, b32).to(out_dtype);
}

at::Tensor scaled_mm(at::Tensor a, const at::Tensor& a_scale, at::Tensor b, const at::Tensor& b_scale,
                     at::ScalarType out_dtype, bool fast_accum) {
  pad_inner_dimension_for_cuda(a, b);
  if (!row_major(a)) a = a.contiguous();
  if (row_major(b)) b = b.t().contiguous().t();
  if (a.is_cpu()) return scaled_mm_emulated_on_cpu(a, a_scale.reciprocal(), b, b_scale.reciprocal(), out_dtype);
  return at::_scaled_mm(a, b, a_scale.reciprocal(), b_scale.reciprocal(), std::nullopt, std::nullopt, out_dtype,
                        fast_accum);
}

// Under LibTorch 2.11's CPU autocast, _scaled_mm computes other numbers than without it;
// torchao's float8 tensors reach it below the autocast dispatch key, so its matmuls, like
// these, never see autocast.
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::autocast_dispatch_keyset};
};

// The matmul's rows back in the input's leading dimensions (... x K in, ... x N out).
at::Tensor with_input_batch_shape(const at::Tensor& output, const at::Tensor& input) {
  std::vector<std::int64_t> sizes = input.sizes().vec();
  sizes.back() = output.size(-1);
  return output.reshape(sizes);
}

// torchao's matmul_with_hp_or_float8_args with the tensorwise casts (bias outside).
class Float8Matmul : public torch::autograd::Function<Float8Matmul> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const Float8LinearScales& scales) {
    const NoAutocast no_autocast;
    const at::Tensor x = input.reshape({-1, input.size(-1)});
    const at::Tensor input_scale = scales.input.defined() ? scales.input : dynamic_scale(x, kE4m3);
    Float8CastObserver* observer = current_observer.get();
    report(observer, Float8Operand::input, x, input_scale, kE4m3);
    const at::Tensor x8 = cast_to_float8(x, input_scale, kE4m3);
    const at::Tensor weight_t = weight.t();
    const at::Tensor weight_scale = scales.weight.defined() ? scales.weight : dynamic_scale(weight_t, kE4m3);
    report(observer, Float8Operand::weight, weight_t, weight_scale, kE4m3);
    const at::Tensor w8_t = cast_to_float8(weight_t, weight_scale, kE4m3);
    at::Tensor output = scaled_mm(x8, input_scale, w8_t, weight_scale, input.scalar_type(), /*fast_accum=*/true);

    ctx->save_for_backward({x8, input_scale, w8_t, weight_scale});
    ctx->saved_data["input_sizes"] = input.sizes().vec();
    if (scales.grad_output.defined()) ctx->saved_data["grad_output_scale"] = scales.grad_output;
    if (scales.grad_output_amax.defined()) ctx->saved_data["grad_output_amax"] = scales.grad_output_amax;
    keep_observer_for_backward(ctx);
    return with_input_batch_shape(output, input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const NoAutocast no_autocast;
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x8 = saved[0], &input_scale = saved[1], &w8_t = saved[2], &weight_scale = saved[3];
    const at::Tensor g = grads[0].reshape({-1, grads[0].size(-1)});
    if (const auto amax = ctx->saved_data.find("grad_output_amax"); amax != ctx->saved_data.end()) {
      at::Tensor recorded = amax->second.toTensor();
      recorded.copy_(at::maximum(recorded, at::max(at::abs(g)).to(recorded.scalar_type())));
    }
    const auto given = ctx->saved_data.find("grad_output_scale");
    const at::Tensor g_scale = given != ctx->saved_data.end() ? given->second.toTensor() : dynamic_scale(g, kE5m2);
    report(forward_observer(ctx), Float8Operand::grad_output, g, g_scale, kE5m2);
    const at::Tensor g8 = cast_to_float8(g, g_scale, kE5m2);

    const at::Tensor grad_input =
        scaled_mm(g8, g_scale, w8_t.t(), weight_scale, g.scalar_type(), /*fast_accum=*/false)
            .reshape(ctx->saved_data["input_sizes"].toIntVector());
    const at::Tensor grad_weight = scaled_mm(g8.t(), g_scale, x8, input_scale, g.scalar_type(), /*fast_accum=*/false);
    return {grad_input, grad_weight, at::Tensor()};
  }
};

// torchao's addmm_float8_unwrapped with rowwise scales (a: M x 1, b: 1 x N), or its
// emulate mode on the CPU, whose _scaled_mm takes per-tensor scales only.
at::Tensor rowwise_scaled_mm(at::Tensor a, const at::Tensor& a_scale, at::Tensor b, const at::Tensor& b_scale,
                             at::ScalarType out_dtype, bool fast_accum) {
  if (!a.is_cuda()) return at::mm(a.to(at::kFloat) / a_scale, b.to(at::kFloat) / b_scale).to(out_dtype);
  pad_inner_dimension_for_cuda(a, b);  // the scales are per row of a and column of b: unchanged
  if (!row_major(a)) a = a.contiguous();
  if (row_major(b)) b = b.t().contiguous().t();
  at::Tensor a_inverse = a_scale.reciprocal(), b_inverse = b_scale.reciprocal(), post_inverse;
  if (!fast_accum) {  // torchao: the rowwise kernel is slow without fast accumulation
    post_inverse = a_inverse * b_inverse;
    a_inverse = at::ones({}, a_inverse.options());
    b_inverse = at::ones({}, a_inverse.options());
  }
  // _scaled_mm has no float32 (or float16) output with rowwise scales: bfloat16, then cast.
  const bool via_bf16 = out_dtype == at::kFloat || out_dtype == at::kHalf;
  at::Tensor output = at::_scaled_mm(a, b, a_inverse, b_inverse, std::nullopt, std::nullopt,
                                     via_bf16 ? at::kBFloat16 : out_dtype, fast_accum);
  if (post_inverse.defined()) output.mul_(post_inverse);
  return via_bf16 ? output.to(out_dtype) : output;
}

struct RowwiseCast {
  at::Tensor data, scale;
};

// torchao's hp_tensor_to_float8_dynamic, e4m3 with axiswise scales along `dim`, reported to
// `observer` as `operand`.
RowwiseCast cast_rowwise(const at::Tensor& x, std::int64_t dim, Float8CastObserver* observer, Float8Operand operand) {
  at::Tensor scale = rowwise_scale_for_float8(x, dim, kE4m3);
  report(observer, operand, x, scale, kE4m3);
  return {cast_to_float8(x, scale, kE4m3), std::move(scale)};
}

// torchao's matmul_with_hp_or_float8_args with the rowwise casts (bias outside).
class Float8RowwiseMatmul : public torch::autograd::Function<Float8RowwiseMatmul> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight) {
    const NoAutocast no_autocast;
    Float8CastObserver* observer = current_observer.get();
    const RowwiseCast x8 = cast_rowwise(input.reshape({-1, input.size(-1)}), -1, observer, Float8Operand::input);
    const RowwiseCast w8_t = cast_rowwise(weight.t(), 0, observer, Float8Operand::weight);
    const at::Tensor output =
        rowwise_scaled_mm(x8.data, x8.scale, w8_t.data, w8_t.scale, input.scalar_type(), /*fast_accum=*/true);
    ctx->save_for_backward({input, weight});
    keep_observer_for_backward(ctx);
    return with_input_batch_shape(output, input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const NoAutocast no_autocast;
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor g = grads[0].reshape({-1, grads[0].size(-1)});
    const at::Tensor x = input.reshape({-1, input.size(-1)});

    Float8CastObserver* observer = forward_observer(ctx);
    const RowwiseCast g8_rows = cast_rowwise(g, -1, observer, Float8Operand::grad_output);
    const RowwiseCast w8_t_rows = cast_rowwise(weight.t(), -1, observer, Float8Operand::weight);
    const at::Tensor grad_input = rowwise_scaled_mm(g8_rows.data, g8_rows.scale, w8_t_rows.data.t(),
                                                    w8_t_rows.scale.t(), g.scalar_type(), /*fast_accum=*/false)
                                      .reshape(input.sizes());
    const RowwiseCast g8_columns = cast_rowwise(g, 0, observer, Float8Operand::grad_output);
    const RowwiseCast x8_columns = cast_rowwise(x, 0, observer, Float8Operand::input);
    const at::Tensor grad_weight = rowwise_scaled_mm(g8_columns.data.t(), g8_columns.scale.t(), x8_columns.data,
                                                     x8_columns.scale, g.scalar_type(), /*fast_accum=*/false);
    return {grad_input, grad_weight};
  }
};

// Under autocast the input in the autocast dtype of its device (torchao: CUDA's only).
at::Tensor autocast_input(const at::Tensor& input) {
  const at::DeviceType device = input.device().type();
  return at::autocast::is_autocast_enabled(device) ? input.to(at::autocast::get_autocast_dtype(device)) : input;
}

}  // namespace

at::Tensor scale_for_float8(const at::Tensor& amax, at::ScalarType float8_dtype) {
  // Python's `max / t` is t.reciprocal() * max (Tensor.__rtruediv__), in float64 here.
  return (at::reciprocal(at::clamp_min(amax.to(at::kDouble), 1e-12)) * float8_max(float8_dtype)).to(at::kFloat);
}

at::Tensor cast_to_float8(const at::Tensor& x, const at::Tensor& scale, at::ScalarType float8_dtype) {
  const double max = float8_max(float8_dtype);
  return at::clamp(x.to(at::kFloat) * scale, -max, max).to(float8_dtype);
}

Float8CastObserverScope::Float8CastObserverScope(std::shared_ptr<Float8CastObserver> observer)
    : previous_(std::exchange(current_observer, std::move(observer))) {}

Float8CastObserverScope::~Float8CastObserverScope() { current_observer = std::move(previous_); }

at::Tensor float8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const Float8LinearScales& scales) {
  at::Tensor output = Float8Matmul::apply(autocast_input(input), weight, scales);
  if (bias.defined()) output = output + bias.to(output.scalar_type());
  return output;
}

at::Tensor Float8TensorwiseLinear::forward(const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& bias) {
  return float8_linear(input, weight, bias);
}

at::Tensor rowwise_scale_for_float8(const at::Tensor& x, std::int64_t dim, at::ScalarType float8_dtype) {
  const at::Tensor scale = scale_for_float8(at::amax(at::abs(x), {dim}, /*keepdim=*/true), float8_dtype);
  return at::exp2(at::floor(at::log2(scale)));
}

at::Tensor float8_rowwise_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor output = Float8RowwiseMatmul::apply(autocast_input(input), weight);
  if (bias.defined()) output = output + bias.to(output.scalar_type());
  return output;
}

at::Tensor Float8RowwiseLinear::forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return float8_rowwise_linear(input, weight, bias);
}

}  // namespace mixt
