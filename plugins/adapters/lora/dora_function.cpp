// DoRA (Liu et al. 2024) on an adapted layer, as PEFT 0.21 computes it
// (peft/tuners/lora/dora.py, DoraLinearLayer; variants.py, DoraLinearVariant): the weight's
// direction W + scaling * B A, rescaled row by row to the trained magnitude m:
//
//   y = base(x) + (m / ||W + s B A||_row - 1) * (W x) + (m / ||W + s B A||_row) * B A x * s
//
// with the norm detached (section 4.3 of the paper), so that only m, A and B get gradients.
#include <utility>

#include "low_rank.h"

namespace mixt::adapters {

namespace {
// The row norms of weight + scaling * lora_weight, in weight's dtype (PEFT's get_weight_norm).
at::Tensor weight_norm(const at::Tensor& weight, const at::Tensor& lora_weight, double scaling) {
  return at::linalg_vector_norm(weight + scaling * lora_weight, 2, {1}).to(weight.scalar_type());
}

class DoraFunction : public LinearFunction {
 public:
  DoraFunction(std::shared_ptr<LinearFunction> base, LowRank low_rank, at::Tensor magnitude)
      : base_(std::move(base)), l_(std::move(low_rank)), magnitude_(std::move(magnitude)) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    at::Tensor result = base_ ? base_->forward(input, weight, bias) : at::linear(input, weight, bias);
    const auto result_dtype = result.scalar_type();
    at::Tensor x = input.to(l_.a->weight.scalar_type());  // PEFT's _cast_input_dtype
    // PEFT reuses the layer's output, less its bias, unless dropout changes the input: then
    // the base product is computed again on the dropped-out input, with F.linear.
    at::Tensor base_result;
    if (l_.dropout > 0 && l_.owner->is_training()) {
      x = at::dropout(x, l_.dropout, true);
      base_result = at::linear(x, weight.to(x.scalar_type()));
    } else {
      base_result = bias.defined() ? result - bias : result;
    }
    // B A as PEFT forms it, lora_B(lora_A(I)).T, and only for the norm: detached.
    const at::Tensor eye = at::eye(l_.a->weight.size(1), l_.a->weight.options());
    const at::Tensor lora_weight = at::linear(at::linear(eye, l_.a->weight), l_.b->weight).t().to(x.scalar_type());
    const at::Tensor norm = weight_norm(weight.to(x.scalar_type()), lora_weight.detach(), l_.scaling).detach();
    const at::Tensor mag_norm_scale = (magnitude_ / norm).view({1, -1});
    const at::Tensor lora_result = at::linear(at::linear(x, l_.a->weight), l_.b->weight);
    const at::Tensor dora = (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * l_.scaling;
    return (result + dora).to(result_dtype);
  }

 private:
  std::shared_ptr<LinearFunction> base_;
  LowRank l_;
  at::Tensor magnitude_;
};
}  // namespace

std::shared_ptr<LinearFunction> dora_function(std::shared_ptr<LinearFunction> base, LowRank low_rank,
                                              at::Tensor magnitude) {
  return std::make_shared<DoraFunction>(std::move(base), std::move(low_rank), std::move(magnitude));
}

at::Tensor dora_magnitude(const at::Tensor& weight, const LowRank& low_rank) {
  at::NoGradGuard no_grad;
  const at::Tensor lora_weight = at::matmul(low_rank.b->weight, low_rank.a->weight);  // update_layer's B @ A
  return weight_norm(weight, lora_weight, low_rank.scaling);
}

void merge_dora(at::Tensor& weight, const LowRank& low_rank, const at::Tensor& magnitude) {
  const at::Tensor delta = low_rank.delta_weight();
  // The norm of the unmerged weight with the scaled update (scaling 1: delta has it).
  const at::Tensor norm = weight_norm(weight, delta, 1.0);
  const at::Tensor factor = (magnitude / norm).view({-1, 1});
  weight.copy_(factor * (weight + delta));
}

}  // namespace mixt::adapters
