// mixt/helpers/nf4.h: torchao's NF4Tensor (nf4_tensor.py), its operations in its order, so
// that every rounding happens where torchao's does.
#include "mixt/helpers/nf4.h"

#include <torch/autograd.h>

#include <stdexcept>
#include <string>

namespace mixt {

namespace {
// torchao quantises in chunks of this many weights: the [chunk, 16] distances are the peak.
constexpr std::int64_t kChunk = 1024 * 1024;

at::Tensor block_absmax(const at::Tensor& flat, std::int64_t block_size) {
  return std::get<0>(flat.view({flat.numel() / block_size, block_size}).abs().max(1));
}

// The groups' factors as one per block (the last group may be short).
at::Tensor factor_per_block(const Nf4Weight& w) {
  return w.factors.repeat_interleave(w.scaler_block_size).slice(0, 0, w.scalers.numel());
}

struct Nf4Holder : torch::CustomClassHolder {
  explicit Nf4Holder(std::shared_ptr<const Nf4Weight> w) : weight(std::move(w)) {}
  std::shared_ptr<const Nf4Weight> weight;
};

// torchao's LinearNF4: the backward dequantises again instead of keeping the float weight.
class Nf4Linear : public torch::autograd::Function<Nf4Linear> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const std::shared_ptr<const Nf4Weight>& weight) {
    ctx->saved_data["nf4"] = c10::IValue::make_capsule(c10::make_intrusive<Nf4Holder>(weight));
    return at::linear(input, nf4_dequantize(*weight).to(input.scalar_type()));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& weight = c10::static_intrusive_pointer_cast<Nf4Holder>(ctx->saved_data["nf4"].toCapsule())->weight;
    const at::Tensor& g = grads[0];
    return {at::matmul(g, nf4_dequantize(*weight).to(g.scalar_type())), at::Tensor()};
  }
};
}  // namespace

std::int64_t Nf4Weight::bytes() const {
  return static_cast<std::int64_t>(codes.nbytes() + scalers.nbytes() + factors.nbytes() + mean.nbytes() + lut.nbytes());
}

Nf4Weight nf4_quantize(const at::Tensor& weight, std::int64_t block_size, std::int64_t scaler_block_size) {
  if (!at::isFloatingType(weight.scalar_type())) {
    throw std::invalid_argument("NF4 quantises floating-point weights, not " +
                                std::string(c10::toString(weight.scalar_type())));
  }
  if (block_size < 2 || block_size % 2 != 0 || scaler_block_size < 1 || weight.numel() % block_size != 0) {
    throw std::invalid_argument("a weight of " + c10::str(weight.sizes()) + " (" + std::to_string(weight.numel()) +
                                " values) is not a whole number of NF4 blocks of " + std::to_string(block_size));
  }
  at::NoGradGuard no_grad;
  Nf4Weight w;
  w.sizes = weight.sizes().vec();
  w.block_size = block_size;
  w.scaler_block_size = scaler_block_size;
  w.dtype = weight.scalar_type();
  // torch.tensor([...], dtype=weight.dtype): each Python float to the dtype through float.
  w.lut = at::tensor(at::ArrayRef<float>(kNf4Values, 16), at::TensorOptions().dtype(at::kFloat))
              .to(weight.device(), w.dtype);
  const at::Tensor flat = weight.contiguous().flatten();
  const std::int64_t n_blocks = flat.numel() / block_size;

  // double_quantize_scalers
  const at::Tensor absmax = block_absmax(flat, block_size);
  w.mean = absmax.mean();
  at::Tensor centred = absmax - w.mean;
  const std::int64_t groups = (n_blocks + scaler_block_size - 1) / scaler_block_size;
  if (const std::int64_t pad = groups * scaler_block_size - n_blocks; pad > 0) {
    centred = at::cat({centred, at::zeros({pad}, centred.options())});  // zeros change no absmax
  }
  const at::Tensor group_blocks = centred.view({groups, scaler_block_size});
  const at::Tensor group_absmax = std::get<0>(group_blocks.abs().max(1));
  w.factors = (2 * group_absmax).reciprocal() * 256;  // torchao's `256 / (2 * absmax)` is __rtruediv__
  w.scalers = (group_blocks * w.factors.unsqueeze(-1))
                  .round()
                  .clamp(-128, 127)
                  .flatten()
                  .slice(0, 0, n_blocks)
                  .to(at::kChar)
                  .contiguous();

  // convert_to_norm_float_weight: each weight over its block's (unquantised) absmax, the
  // nearest NF4 value's index.
  const at::Tensor scaled = (flat.view({n_blocks, block_size}) / absmax.unsqueeze(-1)).flatten();
  at::Tensor indices = at::empty({flat.numel()}, flat.options().dtype(at::kByte));
  for (std::int64_t start = 0; start < flat.numel(); start += kChunk) {
    const std::int64_t end = std::min(start + kChunk, flat.numel());
    const at::Tensor diff = (scaled.slice(0, start, end).unsqueeze(-1) - w.lut).abs();
    indices.slice(0, start, end).copy_(std::get<1>(diff.min(-1)));
  }
  w.codes =
      at::bitwise_or(indices.slice(0, 0, c10::nullopt, 2).bitwise_left_shift(4), indices.slice(0, 1, c10::nullopt, 2))
          .contiguous();
  return w;
}

at::Tensor nf4_dequantize(const Nf4Weight& w) {
  at::NoGradGuard no_grad;
  const at::Tensor first = w.lut.index({w.codes.bitwise_right_shift(4).to(at::kLong)});
  const at::Tensor second = w.lut.index({w.codes.bitwise_and(0b1111).to(at::kLong)});
  // dequantize_scalers: int8 / factor in the dtype, then the mean added back.
  const at::Tensor scalers = (w.scalers / factor_per_block(w)).to(w.dtype) + w.mean;
  const at::Tensor repeated = scalers.unsqueeze(-1).expand({scalers.size(0), w.block_size / 2}).flatten();
  return at::stack({first * repeated, second * repeated}, -1).reshape(w.sizes);
}

at::Tensor nf4_linear(const at::Tensor& input, const std::shared_ptr<const Nf4Weight>& weight) {
  return Nf4Linear::apply(input, weight);
}

at::Tensor Nf4LinearFunction::forward(const at::Tensor& input, const at::Tensor& /*weight*/, const at::Tensor& bias) {
  if (!previous_) {
    const at::Tensor out = nf4_linear(input, weight_);
    return bias.defined() ? out + bias : out;  // torchao's F.linear over an NF4Tensor: the bias after
  }
  return previous_->forward(input, nf4_dequantize(*weight_), bias);
}

std::int64_t quantize_linear_nf4(const LinearLayer& layer) {
  if (layer.weight.requires_grad()) {
    throw std::invalid_argument("'" + layer.name + "' is trained: only a frozen weight is held in NF4");
  }
  auto quantized = std::make_shared<const Nf4Weight>(nf4_quantize(layer.weight));
  const auto freed = static_cast<std::int64_t>(layer.weight.storage().nbytes());
  {
    at::NoGradGuard no_grad;
    const std::vector<std::int64_t> sizes = layer.weight.sizes().vec();
    const at::Tensor one = at::zeros({1}, layer.weight.options());
    layer.weight.set_(one.storage(), 0, sizes, std::vector<std::int64_t>(sizes.size(), 0));
  }
  layer.set_function(
      std::make_shared<Nf4LinearFunction>(std::move(quantized), layer.owner->linear_function(layer.map)));
  return freed;
}

at::Tensor base_weight(const LinearLayer& layer) {
  if (!held_in_nf4(layer.weight)) return layer.weight;
  const auto* nf4 = dynamic_cast<const Nf4LinearFunction*>(layer.owner->linear_function(layer.map).get());
  if (nf4 == nullptr) {
    throw std::logic_error("'" + layer.name + "' is held in NF4 but its function is no longer the NF4 one");
  }
  return nf4_dequantize(nf4->weight());
}

bool held_in_nf4(const at::Tensor& weight) {
  if (!weight.defined() || weight.numel() <= 1 || weight.requires_grad()) return false;
  for (const std::int64_t stride : weight.strides()) {
    if (stride != 0) return false;
  }
  return true;
}

}  // namespace mixt
