// The `lora` adapter: LoRA (Hu et al., 2021) as PEFT's LoraConfig computes it.
//
// On each target linear layer (PEFT's target_modules: mixt/adapter.h) two linear maps
// without bias, lora_A (in -> rank, PEFT's default init: kaiming_uniform(a=sqrt(5)), the
// same as torch.nn.Linear's) and lora_B (rank -> out, zeros), registered as the layer's
// submodules so that the model names them "<layer>.lora_A.weight" and "<layer>.lora_B.weight";
// the layer then computes
//
//   y = base(x) + lora_B(lora_A(dropout(x))) * (alpha / rank)
//
// in PEFT's order of operations, where base is what the layer computed before: at::linear,
// or the LinearFunction a precision policy installed (a float8 policy's), which the
// adapter wraps rather than replaces.
#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixt/adapter.h"
#include "mixt/helpers/linear.h"
#include "mixt/plugin.h"

namespace {

struct LoraOptions {
  std::vector<std::string> targets;
  std::int64_t rank = 8;
  double alpha = 8;
  double dropout = 0.0;
  mixt::RecipeSection where;
};

const auto kOptions =
    mixt::OptionsOf<LoraOptions>()
        .add(&LoraOptions::targets, "targets",
             "the linear layers adapted, by name (at least one): a layer whose name is one of these or ends with "
             "'.' and one (PEFT's target_modules)")
        .add(&LoraOptions::rank, "rank", "the adapters' rank r (PEFT's r); at most the layer's smaller side",
             mixt::at_least(1))
        .add(&LoraOptions::alpha, "alpha", "the update is scaled by alpha / rank (PEFT's lora_alpha)", mixt::above(0))
        .add(&LoraOptions::dropout, "dropout", "dropout on the adapter's input in training (PEFT's lora_dropout)",
             mixt::at_least(0) && mixt::below(1))
        .recipe_section(&LoraOptions::where);

// One adapted layer's computation.
class LoraFunction : public mixt::LinearFunction {
 public:
  LoraFunction(std::shared_ptr<mixt::LinearFunction> base, torch::nn::Linear a, torch::nn::Linear b, double scaling,
               double dropout, const torch::nn::Module* owner)
      : base_(std::move(base)),
        a_(std::move(a)),
        b_(std::move(b)),
        scaling_(scaling),
        dropout_(dropout),
        owner_(owner) {}

  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    at::Tensor result = base_ ? base_->forward(input, weight, bias) : at::linear(input, weight, bias);
    const auto result_dtype = result.scalar_type();
    at::Tensor x = input.to(a_->weight.scalar_type());  // PEFT's _cast_input_dtype
    if (dropout_ > 0) x = at::dropout(x, dropout_, owner_->is_training());
    result = result + at::linear(at::linear(x, a_->weight), b_->weight) * scaling_;
    return result.to(result_dtype);
  }

 private:
  std::shared_ptr<mixt::LinearFunction> base_;
  torch::nn::Linear a_, b_;
  double scaling_, dropout_;
  const torch::nn::Module* owner_;
};

class Lora : public mixt::Adapter {
 public:
  explicit Lora(LoraOptions o) : o_(std::move(o)) {}

  void apply(torch::nn::Module& model) override {
    const std::vector<mixt::LinearLayer> targets = mixt::adapter_targets(model, o_.targets, o_.where, "targets");
    for (const mixt::LinearLayer& layer : targets) {
      torch::nn::Module* owner = mixt::owner_module(layer);
      if (!layer.map.empty() || owner == nullptr) {
        o_.where.fail("targets", "'" + layer.name + "' is a linear map inside a module, which lora does not adapt",
                      "name mixt::Linear layers");
      }
      const std::int64_t smaller = std::min(layer.in_features(), layer.out_features());
      if (o_.rank > smaller) {
        o_.where.fail("rank",
                      "rank " + std::to_string(o_.rank) + " is above the size of '" + layer.name + "' (" +
                          std::to_string(layer.in_features()) + " in, " + std::to_string(layer.out_features()) +
                          " out)",
                      "a rank of at most " + std::to_string(smaller));
      }
      torch::nn::Linear a(torch::nn::LinearOptions(layer.in_features(), o_.rank).bias(false));
      torch::nn::Linear b(torch::nn::LinearOptions(o_.rank, layer.out_features()).bias(false));
      {
        at::NoGradGuard no_grad;
        b->weight.zero_();
      }
      a->to(layer.weight.device(), layer.weight.scalar_type());
      b->to(layer.weight.device(), layer.weight.scalar_type());
      owner->register_module("lora_A", a);
      owner->register_module("lora_B", b);
      layer.set_function(std::make_shared<LoraFunction>(layer.owner->linear_function(layer.map), a, b,
                                                        o_.alpha / static_cast<double>(o_.rank), o_.dropout, owner));
    }
  }

  std::string peft_config() const override {
    // Integral values as integers: PEFT's LoraConfig types r and lora_alpha as int.
    const auto number = [](double v) {
      return v == std::floor(v) ? nlohmann::json(static_cast<std::int64_t>(v)) : nlohmann::json(v);
    };
    nlohmann::json config = {{"peft_type", "LORA"},
                             {"r", o_.rank},
                             {"lora_alpha", number(o_.alpha)},
                             {"lora_dropout", o_.dropout},
                             {"target_modules", o_.targets},
                             {"bias", "none"},
                             {"fan_in_fan_out", false},
                             {"init_lora_weights", true},
                             {"use_rslora", false},
                             {"use_dora", false},
                             {"inference_mode", true}};
    return config.dump();
  }

 private:
  LoraOptions o_;
};

void register_components(mixt::Registrar& r) {
  r.add_adapter("lora", "LoRA: low-rank updates of chosen linear layers, the base frozen (PEFT's LoraConfig)", kOptions,
                [](const LoraOptions& o, const mixt::AdapterContext&) { return std::make_unique<Lora>(o); });
}

}  // namespace

MIXT_PLUGIN("lora", "1.0.0", register_components)
