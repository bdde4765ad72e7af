// pow2_float8 — a float8 training recipe written outside the mixt tree with the SDK's seams
// only (docs/writing-a-policy.md, "A float8 recipe of your own"): the model in bfloat16 with float32
// master weights (mixt/helpers/master_weights.h), and every linear layer whose dimensions
// at::_scaled_mm takes (multiples of 16; mixt/helpers/linear.h) computing its three matmuls
// in float8 (mixt/helpers/float8.h) under a scale rule of its own: input and weight scales
// are torchao's tensorwise scales rounded down to a power of two, then divided by 2^margin
// for headroom. A power-of-two scale multiplies exactly, so scaling loses no mantissa bits.
// The output gradient keeps torchao's dynamic scale (it is not known before the backward).
#include <mixt/helpers/float8.h>
#include <mixt/helpers/linear.h>
#include <mixt/helpers/master_weights.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/precision.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace {

class PowerOfTwoScales : public mixt::LinearFunction {
 public:
  explicit PowerOfTwoScales(std::int64_t margin) : headroom_(std::ldexp(1.0, -static_cast<int>(margin))) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    mixt::Float8LinearScales scales;  // grad_output left undefined: dynamic, as torchao's tensorwise
    scales.input = scale(input);
    scales.weight = scale(weight);
    return mixt::float8_linear(input, weight, bias, scales);
  }

 private:
  // 2^floor(log2(e4m3_max / amax)) / 2^margin: a float32 scalar, as float8_linear takes it.
  at::Tensor scale(const at::Tensor& x) const {
    const at::Tensor tensorwise = mixt::scale_for_float8(x.detach().abs().max(), at::kFloat8_e4m3fn);
    return at::exp2(at::floor(at::log2(tensorwise))) * headroom_;
  }
  double headroom_;
};

class Pow2Float8Policy : public mixt::PrecisionPolicy {
 public:
  Pow2Float8Policy(std::vector<std::string> fp32_modules, std::int64_t margin)
      : fp32_modules_(std::move(fp32_modules)), margin_(margin) {}

  // The model to bfloat16 (but fp32_modules), then the float8 function on each layer it fits.
  void setup(torch::nn::Module& model, at::Device) override {
    mixt::cast_model(model, at::kBFloat16,
                     [&](const std::string& name) { return mixt::lies_under(name, fp32_modules_); });
    const auto function = std::make_shared<PowerOfTwoScales>(margin_);
    for (const mixt::LinearLayer& layer : mixt::linear_layers(model)) {
      if (mixt::lies_under(layer.name + ".weight", fp32_modules_)) continue;  // float32, as the recipe asks
      if (layer.in_features() % 16 == 0 && layer.out_features() % 16 == 0) layer.set_function(function);
    }
  }
  // Everything else is bf16_master's: float32 masters in the optimizer, rounded into the model.
  std::vector<std::pair<std::string, at::Tensor>> optimizer_parameters(torch::nn::Module& model) override {
    return masters_.make(model);
  }
  mixt::AutocastScope autocast(at::DeviceType device) const override {
    return mixt::AutocastScope(device, at::kBFloat16);
  }
  void gradients_ready(mixt::Optimizer&) override { masters_.hand_gradients(); }
  mixt::StepOutcome step(mixt::Optimizer& optimizer) override {
    optimizer.step();
    masters_.round_into_model();
    return true;
  }
  // The scales are computed from each tensor as it is cast: the masters are all the state.
  void save(torch::serialize::OutputArchive& archive) const override { masters_.save(archive); }
  void load(torch::serialize::InputArchive& archive) override { masters_.load(archive); }

 private:
  std::vector<std::string> fp32_modules_;
  std::int64_t margin_;
  mixt::MasterWeights masters_;
};

struct Pow2Float8Options {
  std::int64_t margin = 0;
};
const auto kOptions = mixt::OptionsOf<Pow2Float8Options>().add(
    &Pow2Float8Options::margin, "margin", "headroom: the power-of-two scales are divided by 2^margin",
    mixt::between(0, 16));

void register_components(mixt::Registrar& registrar) {
  registrar.add_precision("pow2_float8",
                          "example: float8 linear layers (dims multiples of 16) with input and weight scales rounded "
                          "down to a power of two, the rest bfloat16 with float32 masters",
                          kOptions, [](const Pow2Float8Options& o, const mixt::PrecisionContext& context) {
                            return std::unique_ptr<mixt::PrecisionPolicy>(
                                std::make_unique<Pow2Float8Policy>(context.fp32_modules, o.margin));
                          });
}

}  // namespace

MIXT_PLUGIN("pow2_float8", "0.1.0", register_components)
