#include "experiment/model_only.h"

#include "assembly/components.h"
#include "mixt/cached_decoding.h"
#include "mixt/error.h"
#include "recipe/recipe_loader.h"

namespace mixt {

namespace {

// The recipe's precision section, or `{name: fp32}` when it has none.
std::unique_ptr<PrecisionPolicy> model_only_precision(const Recipe& recipe, const Registry& registry, Model& model,
                                                      at::Device device) {
  static const RecipeNodePtr fp32 = parse_yaml("precision: {name: fp32}", "(default precision)");
  const Config section =
      recipe.config().has("precision") ? recipe.config().section("precision") : Config(fp32, "").section("precision");
  std::unique_ptr<PrecisionPolicy> policy = registry.make_precision(section, PrecisionContext{device, nullptr, {}});
  policy->setup(model, device);
  return policy;
}

}  // namespace

bool recipe_has_data(const Recipe& recipe) { return recipe.config().has("data"); }

std::int64_t model_context_length(const Model& model) {
  const auto* cached = dynamic_cast<const CachedDecoding*>(&model);
  return cached ? cached->context_length() : 0;
}

ModelOnly build_model_only(const ModelPlan& plan, const Registry& registry, bool ema, const std::string& command,
                           std::optional<at::Device> device, bool with_precision) {
  ModelOnly only;
  const InferenceSettings settings = InferenceSettings::read(plan.recipe, device);
  only.task = registry.make_task(task_section_of(plan.recipe.config()), TaskContext{settings.device, 0});
  only.inference =
      std::make_unique<Inference>(plan, registry, settings, std::vector<std::int64_t>{}, 0,
                                  ShapeSource{"its own options", " (the recipe has no data section)"}, ema, command);
  Model& model = only.inference->model();
  only.context_length = model_context_length(model);
  if (only.task->predicts_next_token()) {
    // One sequence of one token: what the model predicts over is its output's last size.
    at::NoGradGuard no_grad;
    only.vocabulary = model.forward(only.task->blank_inputs({1, 1}, settings.device)).size(-1);
  }
  if (with_precision) only.precision = model_only_precision(plan.recipe, registry, model, settings.device);
  return only;
}

}  // namespace mixt
