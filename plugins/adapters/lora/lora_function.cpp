// LoRA's computation of an adapted layer (low_rank.h), in PEFT's order of operations
// (peft/tuners/lora/layer.py, Linear.forward and merge).
#include <utility>

#include "low_rank.h"

namespace mixt::adapters {

namespace {
class LoraFunction : public LinearFunction {
 public:
  LoraFunction(std::shared_ptr<LinearFunction> base, LowRank low_rank)
      : base_(std::move(base)), l_(std::move(low_rank)) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    at::Tensor result = base_ ? base_->forward(input, weight, bias) : at::linear(input, weight, bias);
    const auto result_dtype = result.scalar_type();
    at::Tensor x = input.to(l_.a->weight.scalar_type());  // PEFT's _cast_input_dtype
    if (l_.dropout > 0) x = at::dropout(x, l_.dropout, l_.owner->is_training());
    result = result + at::linear(at::linear(x, l_.a->weight), l_.b->weight) * l_.scaling;
    return result.to(result_dtype);
  }

 private:
  std::shared_ptr<LinearFunction> base_;
  LowRank l_;
};
}  // namespace

std::shared_ptr<LinearFunction> lora_function(std::shared_ptr<LinearFunction> base, LowRank low_rank) {
  return std::make_shared<LoraFunction>(std::move(base), std::move(low_rank));
}

void merge_lora(at::Tensor& weight, const LowRank& low_rank) { weight.add_(low_rank.delta_weight()); }

}  // namespace mixt::adapters
