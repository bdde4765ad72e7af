#include "mixt/helpers/fused_linear_cross_entropy.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

namespace mixt {

namespace {

constexpr std::int64_t kMinimumChunkRows = 256;

// The dtype at::linear would compute in here: autocast's for floating inputs when it is on.
at::ScalarType matmul_dtype(const at::Tensor& input) {
  const at::DeviceType device = input.device().type();
  if (at::isFloatingType(input.scalar_type()) && at::autocast::is_autocast_enabled(device)) {
    return at::autocast::get_autocast_dtype(device);
  }
  return input.scalar_type();
}

struct Gradients {
  at::Tensor input, weight, bias;
};

// The loss summed over one chunk's rows, its gradients added to `grads` (not yet divided by
// the count of targets). x: [rows, width] and w: [classes, width] in the matmul dtype.
at::Tensor chunk_loss(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& targets,
                      const FusedCrossEntropyOptions& o, std::int64_t first, Gradients& grads) {
  at::Tensor logits = at::mm(x, w.t());
  if (bias.defined()) logits.add_(bias.to(logits.scalar_type()));
  const at::Tensor z = logits.to(at::kFloat);
  const at::Tensor valid = targets.ne(o.ignore_index);
  const at::Tensor index = at::where(valid, targets, at::zeros({}, targets.options())).unsqueeze(1);
  const double eps = o.label_smoothing;
  // log_softmax and softmax work row by row, so a row's bits do not depend on how the
  // threads split the chunk. Elementwise exp/logsumexp over the whole chunk did: under load
  // their last bits moved, and the softmax's cancellation against the one-hot made that 3e-5
  // of a gradient (1e-6 of the loss).
  at::Tensor logp = at::log_softmax(z, 1);  // PyTorch's cross_entropy: log_softmax, then the target's
  at::Tensor row_loss = logp.gather(1, index).squeeze(1).neg();
  if (eps > 0) row_loss = row_loss * (1.0 - eps) - logp.mean(-1) * eps;
  const at::Tensor loss = at::where(valid, row_loss, at::zeros({}, row_loss.options())).sum();
  logp = at::Tensor();

  // d(row loss)/d(logits) = softmax - (1 - eps) one-hot - eps / classes; nothing for ignored rows.
  at::Tensor g = at::softmax(z, 1);
  logits = at::Tensor();  // its memory is the next chunk's
  g.scatter_add_(1, index, at::full({index.size(0), 1}, -(1.0 - eps), g.options()));
  if (eps > 0) g.sub_(eps / static_cast<double>(g.size(1)));
  g.mul_(valid.unsqueeze(1).to(g.scalar_type()));
  if (grads.bias.defined()) grads.bias.add_(g.sum(0));
  const at::Tensor g_mm = g.to(x.scalar_type());
  at::Tensor input_rows = grads.input.narrow(0, first, x.size(0));
  at::mm_out(input_rows, g_mm, w);
  // The weight's gradient sums in float32 whatever the matmul dtype; none for a frozen head
  // (an adapter's run: it would cost a third of the head's matmuls and a weight's memory).
  if (!grads.weight.defined()) return loss;
  if (x.scalar_type() == at::kFloat) {
    grads.weight.addmm_(g_mm.t(), x);
  } else {
    grads.weight.add_(at::mm(g_mm.t(), x).to(at::kFloat));
  }
  return loss;
}

// `bias_or_empty`: the bias, or an empty tensor for none (autograd's Function takes no
// undefined tensor as an input).
class FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias_or_empty, const at::Tensor& targets,
                            const FusedCrossEntropyOptions& o) {
    const at::Tensor bias = bias_or_empty.numel() > 0 ? bias_or_empty : at::Tensor();
    const at::ScalarType dtype = matmul_dtype(input);
    // The casts are made here, once, rather than by autocast at every chunk.
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const at::Tensor x = input.reshape({-1, input.size(-1)}).to(dtype);
    const at::Tensor w = weight.to(dtype);
    const at::Tensor t = targets.reshape({-1}).to(at::kLong);
    TORCH_CHECK(x.size(0) == t.size(0), "fused_linear_cross_entropy: ", x.size(0), " rows of input but ", t.size(0),
                " targets");
    const std::int64_t rows = x.size(0);
    const std::int64_t chunk =
        std::max<std::int64_t>(1, o.chunk_rows.value_or(fused_cross_entropy_chunk_rows(rows, w.size(0), w.size(1))));
    const auto float_zeros_if_trained = [](const at::Tensor& t) {
      return t.defined() && t.requires_grad() ? at::zeros(t.sizes(), t.options().dtype(at::kFloat)) : at::Tensor();
    };
    Gradients grads{at::empty_like(x), float_zeros_if_trained(weight), float_zeros_if_trained(bias)};
    at::Tensor total = at::zeros({}, x.options().dtype(at::kFloat));
    for (std::int64_t first = 0; first < rows; first += chunk) {
      const std::int64_t n = std::min(chunk, rows - first);
      total.add_(chunk_loss(x.narrow(0, first, n), w, bias, t.narrow(0, first, n), o, first, grads));
    }
    // PyTorch's mean: over the targets not ignored (0/0 = nan when all are), on the device.
    const at::Tensor count = t.ne(o.ignore_index).sum().to(at::kFloat);
    ctx->save_for_backward({grads.input.reshape(input.sizes()).div_(count.to(x.scalar_type())).to(input.scalar_type()),
                            grads.weight.defined() ? grads.weight.div_(count).to(weight.scalar_type()) : at::Tensor(),
                            grads.bias.defined() ? grads.bias.div_(count).to(bias.scalar_type()) : at::Tensor()});
    return total / count;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& scale = grads[0];
    auto scaled = [&](const at::Tensor& g) { return g.defined() ? g * scale.to(g.scalar_type()) : at::Tensor(); };
    return {scaled(saved[0]), scaled(saved[1]), scaled(saved[2]), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::int64_t fused_cross_entropy_chunk_rows(std::int64_t rows, std::int64_t classes, std::int64_t width) {
  const std::int64_t chunks = std::max<std::int64_t>(1, (classes + width - 1) / std::max<std::int64_t>(1, width));
  const std::int64_t wanted = std::max<std::int64_t>(1, (rows + chunks - 1) / chunks);
  std::int64_t power = 1;
  while (power < wanted) power *= 2;
  // Fewer rows make each chunk's matmuls thin and the weight's gradient, read and written
  // once a chunk, the step's main memory traffic: 4.6x slower than the plain loss at 16.
  return std::max<std::int64_t>(power, kMinimumChunkRows);
}

at::Tensor fused_linear_cross_entropy(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                      const at::Tensor& targets, const FusedCrossEntropyOptions& options) {
  TORCH_CHECK(weight.dim() == 2 && input.size(-1) == weight.size(1), "fused_linear_cross_entropy: input ",
              input.sizes(), " does not fit a weight of ", weight.sizes());
  return FusedLinearCrossEntropy::apply(input, weight, bias.defined() ? bias : at::empty({0}, weight.options()),
                                        targets, options);
}

}  // namespace mixt
