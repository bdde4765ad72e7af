// The `lora` and `dora` adapters: LoRA (Hu et al., 2021) and DoRA (Liu et al., 2024) as PEFT's
// LoraConfig computes them (use_dora false and true).
//
// On each target linear layer (PEFT's target_modules: mixt/adapter.h) two linear maps
// without bias, lora_A (in -> rank, PEFT's default init: kaiming_uniform(a=sqrt(5)), the
// same as torch.nn.Linear's) and lora_B (rank -> out, zeros), registered as the layer's
// submodules so that the model names them "<layer>.lora_A.weight" and "<layer>.lora_B.weight";
// dora adds the parameter "<layer>.lora_magnitude_vector" (the name PEFT's files give it),
// the base weight's row norms. The layer then computes (low_rank.h)
//
//   lora: y = base(x) + lora_B(lora_A(dropout(x))) * (alpha / rank)
//   dora: the same direction, each output row rescaled to its magnitude (dora_function.cpp)
//
// in PEFT's order of operations, where base is what the layer computed before: at::linear,
// or the LinearFunction a precision policy installed (a float8 policy's), which the
// adapter wraps rather than replaces. Both merge into the base weights (MergesIntoBase) as
// PEFT's merge_and_unload() does.
#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "low_rank.h"
#include "mixt/adapter.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/nf4.h"
#include "mixt/plugin.h"

namespace {

using mixt::adapters::LowRank;

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

const char* const kMagnitude = "lora_magnitude_vector";

class Lora : public mixt::Adapter, public mixt::MergesIntoBase {
 public:
  Lora(LoraOptions o, bool dora) : o_(std::move(o)), dora_(dora) {}

  void apply(torch::nn::Module& model) override {
    const std::vector<mixt::LinearLayer> targets = mixt::adapter_targets(model, o_.targets, o_.where, "targets");
    for (const mixt::LinearLayer& layer : targets) {
      torch::nn::Module* owner = mixt::owner_module(layer);
      if (!layer.map.empty() || owner == nullptr) {
        o_.where.fail("targets",
                      "'" + layer.name + "' is a linear map inside a module, which " + name() + " does not adapt",
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
      LowRank low_rank;
      low_rank.a = torch::nn::Linear(torch::nn::LinearOptions(layer.in_features(), o_.rank).bias(false));
      low_rank.b = torch::nn::Linear(torch::nn::LinearOptions(o_.rank, layer.out_features()).bias(false));
      {
        at::NoGradGuard no_grad;
        low_rank.b->weight.zero_();
      }
      low_rank.a->to(layer.weight.device(), layer.weight.scalar_type());
      low_rank.b->to(layer.weight.device(), layer.weight.scalar_type());
      low_rank.scaling = o_.alpha / static_cast<double>(o_.rank);
      low_rank.dropout = o_.dropout;
      low_rank.owner = owner;
      owner->register_module("lora_A", low_rank.a);
      owner->register_module("lora_B", low_rank.b);
      std::shared_ptr<mixt::LinearFunction> base = layer.owner->linear_function(layer.map);
      if (dora_ && mixt::held_in_nf4(layer.weight)) {
        // DoRA's norms read the base's values, which an NF4 layer does not hold as its weight.
        o_.where.fail("targets", "'" + layer.name + "' is held in NF4 (quantize_base), which dora does not adapt yet",
                      "use lora over an NF4 base, or dora without quantize_base");
      }
      if (dora_) {
        const at::Tensor magnitude =
            owner->register_parameter(kMagnitude, mixt::adapters::dora_magnitude(layer.weight, low_rank));
        layer.set_function(mixt::adapters::dora_function(base, low_rank, magnitude));
      } else {
        layer.set_function(mixt::adapters::lora_function(base, low_rank));
      }
      layers_[layer.name] = {low_rank, base};
    }
  }

  void merge(torch::nn::Module& model) override {
    at::NoGradGuard no_grad;
    // The layers found again: the checkpoint's values and the move to float32 came after apply().
    for (const mixt::LinearLayer& layer : mixt::adapter_targets(model, o_.targets, o_.where, "targets")) {
      const Adapted& adapted = layers_.at(layer.name);
      at::Tensor weight = layer.weight;
      if (dora_) {
        mixt::adapters::merge_dora(weight, adapted.low_rank,
                                   *mixt::owner_module(layer)->named_parameters(false).find(kMagnitude));
      } else {
        mixt::adapters::merge_lora(weight, adapted.low_rank);
      }
      layer.set_function(adapted.base);
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
                             {"use_dora", dora_},
                             {"inference_mode", true}};
    return config.dump();
  }

 private:
  struct Adapted {
    LowRank low_rank;
    std::shared_ptr<mixt::LinearFunction> base;  // what the layer computed before
  };
  std::string name() const { return dora_ ? "dora" : "lora"; }

  LoraOptions o_;
  bool dora_;
  std::map<std::string, Adapted> layers_;
};

void register_components(mixt::Registrar& r) {
  r.add_adapter("lora", "LoRA: low-rank updates of chosen linear layers, the base frozen (PEFT's LoraConfig)", kOptions,
                [](const LoraOptions& o, const mixt::AdapterContext&) { return std::make_unique<Lora>(o, false); });
  r.add_adapter("dora",
                "DoRA: LoRA's low-rank update as a direction, each output row rescaled to a trained magnitude "
                "(PEFT's LoraConfig(use_dora=True))",
                kOptions,
                [](const LoraOptions& o, const mixt::AdapterContext&) { return std::make_unique<Lora>(o, true); });
}

}  // namespace

MIXT_PLUGIN("lora", "1.1.0", register_components)
