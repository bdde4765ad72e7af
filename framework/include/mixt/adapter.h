// mixt/adapter.h — adapters: a few trainable parameters added to a frozen model (LoRA), the
// eighth plugin kind (since ABI 6.9).
//
// A recipe names one with `adapter: {name: lora, rank: 16, alpha: 32, targets: [q_proj, v_proj]}`.
// mixt builds the model and its precision policy, freezes every parameter of the model
// (requires_grad false), then calls the adapter's apply(): it adds its own parameters to
// the model as submodules of the layers it adapts (so that they are the model's parameters,
// named "<layer>.<its name>.weight", and go into the optimizer and the checkpoints like any
// other trainable parameter), and changes how those layers compute, usually by installing
// a mixt::LinearFunction (mixt/helpers/linear.h) that wraps the one already there (a
// float8 policy's):
//
//   struct LoraOptions { std::vector<std::string> targets; std::int64_t rank = 8; mixt::RecipeSection where; };
//   class Lora : public mixt::Adapter {
//     void apply(torch::nn::Module& model) override {
//       for (const mixt::LinearLayer& layer : mixt::adapter_targets(model, o_.targets, o_.where, "targets")) { ... }
//     }
//     std::string peft_config() const override { return R"({"peft_type": "LORA", ...})"; }
//   };
//   r.add_adapter("lora", "low-rank adapters", kOptions,
//                 [](const LoraOptions& o, const mixt::AdapterContext&) { return std::make_unique<Lora>(o); });
//
// A run writes the adapter's parameters in PEFT's layout, `adapter/adapter_model.safetensors`
// (each parameter's model name prefixed with "base_model.model.", the ".weight" of a
// submodule as PEFT names it) and `adapter/adapter_config.json` (peft_config(), with the keys
// mixt knows added), which `peft.PeftModel.from_pretrained` loads; `adapter: {from: DIR}`
// reads such a folder back (docs/adapters.md).
//
// Since ABI 6.10 an adapter may also derive from mixt::MergesIntoBase: `mixt export
// --merge-adapter` (and --format transformers) folds it into the base weights, as PEFT's
// merge_and_unload() does.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "mixt/helpers/linear.h"
#include "mixt/options.h"

namespace mixt {

struct AdapterContext {
  torch::Device device = torch::kCPU;
};

class Adapter {
 public:
  virtual ~Adapter();
  // Adds the adapter's parameters to `model` (already frozen, on the run's device, set up by
  // the precision policy) and changes the layers it adapts. Recipe errors (a target that
  // matches nothing, a rank the layer cannot take) are thrown from here, through the
  // RecipeSection of the options.
  virtual void apply(torch::nn::Module& model) = 0;
  // PEFT's adapter_config.json for it, a JSON object as text: at least "peft_type" and the
  // keys PEFT's config class of that type needs ("r", "lora_alpha", "target_modules", ...).
  // mixt adds "base_model_name_or_path" and "task_type" when absent.
  virtual std::string peft_config() const = 0;
};

// An optional interface of an Adapter (since ABI 6.10): the adapter folds its update into the
// base weights. The host finds it with a dynamic_cast, so Adapter's virtual table is the 6.9
// one and an adapter without it is refused by name (merge_adapter below).
class MergesIntoBase {
 public:
  virtual ~MergesIntoBase();
  // Called once, after apply() and the checkpoint's values, on the CPU in float32, gradients
  // off. Each layer the adapter changed gets its merged weight in place (the value PEFT's
  // merge_and_unload() gives it; through LinearLayer::weight, which may be a view of the
  // parameter) and computes as it did before apply() (its former LinearFunction back). The
  // adapter's own parameters stay in the model, unused; the host leaves them out of what it
  // writes.
  virtual void merge(torch::nn::Module& model) = 0;
};

// `adapter` (named `name` in errors) merged into `model`'s base weights: its
// MergesIntoBase::merge, or a usage error (exit 2) saying that this adapter cannot merge.
void merge_adapter(Adapter& adapter, const std::string& name, torch::nn::Module& model);

// PEFT's target_modules semantics over the model's linear layers (mixt::linear_layers): a
// layer is a target when a pattern equals its name, or is a suffix of its name after a dot
// ("q_proj" matches "model.layers.0.self_attn.q_proj", "self_attn.q_proj" too). A pattern
// that matches no layer is a recipe error at `key` of `where` listing the model's linear
// layers. In the order of linear_layers(model).
std::vector<LinearLayer> adapter_targets(torch::nn::Module& model, const std::vector<std::string>& patterns,
                                         const RecipeSection& where, std::string_view key);

// The torch::nn::Module a linear layer's owner is, where an adapter registers its
// submodules (null for an owner that is no module).
torch::nn::Module* owner_module(const LinearLayer& layer);

}  // namespace mixt
