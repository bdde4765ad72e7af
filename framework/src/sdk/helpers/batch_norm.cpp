// sync_batch_norm(): batch norm with statistics over every rank's batch (mixt/helpers/batch_norm.h).
//
// The math is torch.nn.SyncBatchNorm's (torch/nn/modules/_functions.py) written with
// device-generic ATen ops, because the fused kernels Python uses (batch_norm_stats,
// batch_norm_gather_stats_with_counts, ...) exist for CUDA only and mixt must also
// synchronise Gloo ranks on CPUs.
//
// Forward: each rank computes its per-channel mean and biased variance (ATen's var_mean,
// numerically stable), then one all-reduce (sum) of [n, n·mean, n·(var + mean²)] in float64
// combines them; float64 keeps E[x²] − E[x]² free of the cancellation it would have in
// float32. One all-reduce per layer rather than Python's all-gather: the counts travel in
// the sum, so ranks with different (even zero) batch sizes need nothing special.
//
// Backward, with x̂ = (x − mean)·invstd and N the global count:
//   dL/dx = w·invstd · (dy − Σdy/N − (x − mean)·invstd² · Σ(dy·(x − mean))/N)
// where both sums run over the global batch: one all-reduce (sum) of the two per-channel
// sums. dL/dw and dL/db stay local: the data-parallel gradient average completes them, as
// DDP does for torch.nn.SyncBatchNorm.
#include "mixt/helpers/batch_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#include "mixt/autocast.h"

namespace mixt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<std::int64_t> reduction_dims(const at::Tensor& input) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector [C] shaped to broadcast against input [N, C, ...].
at::Tensor per_channel(const at::Tensor& values, const at::Tensor& input) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(input.dim()), 1);
  shape[1] = input.size(1);
  return values.view(shape);
}

// Statistics and the affine transform are computed in float32 (float64 inputs stay float64),
// whatever the input's dtype, as cuDNN and torch.nn.SyncBatchNorm do for float16 inputs.
at::ScalarType compute_type(const at::Tensor& input) {
  return input.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// The communicator travels through the autograd context as an integer: saved_data holds
// IValues only. The communicator outlives the graph (the trainer holds it for the run).
std::int64_t as_handle(const Communicator& communicator) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&communicator));
}
const Communicator& from_handle(std::int64_t handle) {
  return *reinterpret_cast<const Communicator*>(static_cast<std::intptr_t>(handle));
}

struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            double exponential_average_factor, double eps, std::int64_t communicator_handle) {
    const Communicator& communicator = from_handle(communicator_handle);
    FullPrecisionScope full_precision(input.device().type());
    const at::ScalarType type = compute_type(input);
    const at::Tensor x = input.to(type);
    const std::int64_t channels = input.size(1);
    const std::int64_t local_count = channels > 0 ? input.numel() / channels : 0;

    // [count, count·mean, count·(var + mean²)] per channel, summed over the ranks.
    at::Tensor sums = at::zeros({3, channels}, x.options().dtype(at::kDouble));
    if (local_count > 0) {
      auto [local_var, local_mean] = at::var_mean(x, reduction_dims(x), /*correction=*/0, /*keepdim=*/false);
      const at::Tensor mean64 = local_mean.to(at::kDouble);
      const double n = static_cast<double>(local_count);
      sums[0].fill_(n);
      sums[1].copy_(mean64 * n);
      sums[2].copy_((local_var.to(at::kDouble) + mean64 * mean64) * n);
    }
    communicator.all_reduce(sums, ReduceOp::sum);
    const at::Tensor count = sums[0];
    const at::Tensor mean64 = sums[1] / count;
    const at::Tensor var64 = (sums[2] / count - mean64 * mean64).clamp_min(0.0);
    const at::Tensor mean = mean64.to(type);
    const at::Tensor invstd = (var64 + eps).rsqrt().to(type);

    if (running_mean.defined()) {
      const double f = exponential_average_factor;
      running_mean.mul_(1.0 - f).add_((mean64 * f).to(running_mean.scalar_type()));
      // The running variance is unbiased with the global count, as in one process.
      const at::Tensor unbiased = var64 * count / (count - 1.0);
      running_var.mul_(1.0 - f).add_((unbiased * f).to(running_var.scalar_type()));
    }

    // y = x·scale + shift, scale = w·invstd, shift = b − mean·scale.
    const at::Tensor scale = weight.defined() ? invstd * weight.to(type) : invstd;
    const at::Tensor shift = bias.defined() ? bias.to(type) - mean * scale : -mean * scale;
    const at::Tensor output = (x * per_channel(scale, x) + per_channel(shift, x)).to(input.scalar_type());

    ctx->save_for_backward({input, weight, mean, invstd, count});
    ctx->saved_data["communicator"] = communicator_handle;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const at::Tensor& count = saved[4];
    const Communicator& communicator = from_handle(ctx->saved_data["communicator"].toInt());

    const at::ScalarType type = compute_type(input);
    const at::Tensor x = input.to(type);
    const at::Tensor dy = grad_outputs[0].to(type);
    const std::vector<std::int64_t> dims = reduction_dims(x);
    const at::Tensor centred = x - per_channel(mean, x);
    const at::Tensor sum_dy = dy.sum(dims);
    const at::Tensor sum_dy_centred = (dy * centred).sum(dims);

    at::Tensor grad_input, grad_weight, grad_bias;
    if (weight.defined() && ctx->needs_input_grad(1)) grad_weight = (sum_dy_centred * invstd).to(weight.scalar_type());
    if (ctx->needs_input_grad(2)) grad_bias = sum_dy.to(weight.defined() ? weight.scalar_type() : type);
    if (ctx->needs_input_grad(0)) {
      at::Tensor global = at::stack({sum_dy, sum_dy_centred});
      communicator.all_reduce(global, ReduceOp::sum);
      const at::Tensor n = count.to(type);
      const at::Tensor mean_dy = global[0] / n;
      const at::Tensor mean_dy_centred = global[1] / n;
      const at::Tensor gain = weight.defined() ? invstd * weight.to(type) : invstd;
      grad_input = ((dy - per_channel(mean_dy, x) - centred * per_channel(invstd * invstd * mean_dy_centred, x)) *
                    per_channel(gain, x))
                       .to(input.scalar_type());
    }
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var,
                           double exponential_average_factor, double eps, const Communicator& communicator) {
  TORCH_CHECK(input.dim() >= 2, "sync_batch_norm: expected an input of at least 2 dimensions (N, C, ...), got ",
              input.dim());
  return SyncBatchNormFunction::apply(input, weight, bias, running_mean, running_var, exponential_average_factor,
                                      eps, as_handle(communicator));
}

}  // namespace mixt
