#include "experiment/inference.h"

#include "assembly/adapters.h"
#include "assembly/trainer_options.h"
#include "common/warnings.h"
#include "mixt/error.h"

namespace mixt {

InferenceSettings InferenceSettings::read(const Recipe& recipe, std::optional<at::Device> device) {
  const Config trainer = recipe.config().section("trainer");
  const TrainerOptions options = TrainerOptions::read(trainer);  // through the declarations, checked
  InferenceSettings settings;
  settings.device = device ? *device : resolve_device(options.device, trainer);
  settings.channels_last = options.channels_last;
  settings.seed = options.seed;
  return settings;
}

Inference::Inference(const ModelPlan& plan, const Registry& registry, const InferenceSettings& settings,
                     const std::vector<std::int64_t>& sample_shape, std::int64_t classes,
                     const ShapeSource& shape_source, bool ema, const std::string& command)
    : device_(settings.device), channels_last_(settings.channels_last) {
  const Config root = plan.recipe.config();
  const Config section = root.section("model");
  if (plan.checkpoint.empty() && !plan.named_weights && command != "check") {
    warn(
        "model.weights is not set: these outputs come from untrained (seed 0) weights; name the weights with "
        "model.weights=FILE.safetensors (mixt export writes one from a checkpoint), or a run directory");
  }
  at::manual_seed(0);
  try {
    model_ = build_model(section, registry, ModelContext{device_, sample_shape, classes});
  } catch (const Error& e) {
    // The sample shape came from the input, not from the recipe's data: say so, or a batch
    // without its batch dimension reads as a recipe or weights mistake.
    throw Error(e.kind(), e.message(), e.where(), e.key_path(),
                (e.hint().empty() ? "" : e.hint() + "\n  note: ") + "mixt " + command +
                    " builds the model for the samples of " + shape_source.what + ": " +
                    c10::str(at::IntArrayRef(sample_shape)) + shape_source.note +
                    (section.has("num_classes") || classes > 0
                         ? std::string()
                         : " and, not opening the datasets, with the model's default class count: set "
                           "model.num_classes=N to the training data's (a run directory's recipe.yaml states it)"));
  }
  // The recipe's adapter, so that the checkpoint's adapter tensors have their parameters.
  if (root.has("adapter"))
    adapter_ = apply_adapter(root.section("adapter"), registry, *model_, AdapterContext{device_});
  // Only the model is built from the recipe, so only its section is checked: a misspelt
  // model.weigths would predict with untrained weights and exit 0.
  check_unknown_keys(*plan.recipe.root, "model");
  if (!plan.checkpoint.empty()) load_checkpoint_weights(*model_, device_, plan.checkpoint, ema);
  model_->to(device_);
  model_->eval();
}

Inference::Inference(Components& components, const RunFacts& facts, const ModelPlan& plan, bool ema, std::uint64_t seed)
    : model_(components.model), device_(facts.device), channels_last_(facts.channels_last) {
  if (!plan.checkpoint.empty()) {
    load_checkpoint_weights(*model_, device_, plan.checkpoint, ema);
  } else if (!plan.named_weights) {
    warn("model.weights is not set: these figures are those of untrained (seed " + std::to_string(seed) +
         ") weights; name a run directory or checkpoint, or model.weights=FILE.safetensors");
  }
  model_->eval();
}

at::Tensor Inference::forward(const at::Tensor& batch) const {
  at::NoGradGuard no_grad;
  at::Tensor x = batch.to(device_, at::kFloat);
  if (channels_last_ && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  return model_->forward(x);
}

}  // namespace mixt
