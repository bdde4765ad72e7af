#include "experiment/model_source.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "assembly/components.h"
#include "assembly/transformers_dir.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "checkpoint/model_state.h"
#include "common/warnings.h"
#include "mixt/error.h"
#include "mixt/helpers/state_dict.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTargetHint =
    "name a recipe (.yaml), a run directory (runs/<name>/<timestamp>), its checkpoints/ or a checkpoint file";

bool is_checkpoint_file(const fs::path& file) {
  char magic[sizeof(kCheckpointMagic)] = {};
  std::ifstream in(file, std::ios::binary);
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kCheckpointMagic, sizeof(magic)) == 0;
}

}  // namespace

ModelTarget resolve_model_target(const std::string& argument, const std::string& command, bool best) {
  std::error_code ec;
  fs::path path(argument);
  if (!fs::exists(path, ec)) throw usage_error(argument + ": no such file or directory", kTargetHint);
  const std::string extension = path.extension().string();
  if (best && !fs::is_directory(path, ec)) {
    throw usage_error("--best takes a run directory (or its checkpoints/), and " + argument + " is a file",
                      "name the run directory, or the file without --best");
  }
  if (fs::is_regular_file(path, ec) && (extension == ".yaml" || extension == ".yml")) return {path, {}, {}};
  if (fs::is_regular_file(path, ec) && !is_checkpoint_file(path)) {
    throw usage_error(argument + " is neither a recipe (.yaml) nor a mixt checkpoint", kTargetHint);
  }
  ModelTarget target;
  const std::string key_path = "mixt " + command + "'s argument";
  target.checkpoint = best ? resolve_best_checkpoint(path, key_path) : resolve_checkpoint(path, key_path);
  // runs/<name>/<timestamp>/checkpoints/<file>: the run directory holds recipe.yaml.
  fs::path run = fs::absolute(path);
  if (!run.has_filename()) run = run.parent_path();
  if (!fs::is_directory(run, ec)) run = run.parent_path();
  if (run.filename() == "checkpoints") run = run.parent_path();
  target.run = run;
  target.recipe = run / "recipe.yaml";
  if (!fs::is_regular_file(target.recipe, ec)) {
    throw usage_error("no recipe.yaml in " + run.string() + " for the checkpoint " + target.checkpoint.string(),
                      "name the checkpoint inside its run directory (runs/<name>/<timestamp>/checkpoints/), or the "
                      "recipe with model.weights=FILE.safetensors (mixt export writes one)");
  }
  return target;
}

ModelPlan plan_model(const ModelTarget& target, const std::vector<std::string>& overrides, bool ema) {
  if (ema && target.checkpoint.empty()) {
    throw usage_error(
        "--ema reads the ema callback's average from a checkpoint, and " + target.recipe.string() + " is a recipe",
        "name the run directory or checkpoint (mixt export --ema writes the average as safetensors)");
  }
  ModelPlan plan;
  plan.recipe = load_recipe(target.recipe, overrides);
  // The run's own trainer.resume (a run that resumed another) is not the model asked for.
  if (RecipeEntry* trainer = plan.recipe.root->find("trainer"); trainer && trainer->value->is_map()) {
    trainer->value->erase("resume");
  }
  const Config model_section = plan.recipe.config().section("model");
  plan.named_weights = model_section.has("weights") || model_section.has("from");
  const bool weights_given = std::any_of(overrides.begin(), overrides.end(),
                                         [](const std::string& o) { return o.rfind("model.weights=", 0) == 0; });
  plan.checkpoint = weights_given ? fs::path() : target.checkpoint;
  if (RecipeEntry* model = plan.recipe.root->find("model");
      !plan.checkpoint.empty() && model && model->value->is_map()) {
    model->value->erase("weights");
  }
  if (ema && plan.checkpoint.empty()) {
    throw usage_error("--ema reads the ema callback's average from a checkpoint, not from model.weights",
                      "leave out model.weights=, or export the average with mixt export --ema and name that file");
  }
  return plan;
}

void load_checkpoint_weights(Model& model, at::Device device, const fs::path& checkpoint, bool ema) {
  CheckpointContents contents = read_checkpoint(checkpoint, device);
  const NamedTensors weights = checkpoint_weights(contents, checkpoint, ema);
  // A run with an adapter saved no frozen base: the recipe's model.from gave it.
  const LoadReport fit = checkpoint_fit(model, weights, omits_frozen_base(contents));
  if (!fit.complete()) {
    throw Error(ErrorKind::recipe, "weights do not match the model" + fit.describe(),
                SourceLocation{checkpoint.string()}, {},
                "use a checkpoint with the recipe of its run (its run directory's recipe.yaml), without "
                "overrides that change the model");
  }
  load_state_dict(model, weights, /*strict=*/false, checkpoint.string());
}

std::vector<std::string> run_class_names(const ModelTarget& target) {
  std::vector<std::string> names;
  if (target.run.empty()) return names;
  std::ifstream file(target.run / "classes.txt");
  for (std::string line; std::getline(file, line);) names.push_back(line);
  return names;
}

namespace {
std::string model_key(const Recipe& recipe, const char* key) {
  const RecipeEntry* model = recipe.root->find("model");
  const RecipeEntry* entry = model && model->value->is_map() ? model->value->find(key) : nullptr;
  return entry ? entry->value->scalar : "";
}
}  // namespace

std::string recipe_weights(const Recipe& recipe) { return model_key(recipe, "weights"); }

std::string recipe_from(const Recipe& recipe) { return model_key(recipe, "from"); }

std::string recipe_tokenizer(const Recipe& recipe) {
  const std::string named = model_key(recipe, "tokenizer");
  if (!named.empty()) return named;
  const std::string from = recipe_from(recipe);
  return from.empty() ? "" : transformers_dir_tokenizer(from);
}

std::string weights_source(const ModelPlan& plan, const std::string& argument) {
  if (!plan.checkpoint.empty()) return plan.checkpoint.string();
  if (!plan.named_weights) return argument;
  const std::string weights = recipe_weights(plan.recipe);
  return weights.empty() ? model_key(plan.recipe, "from") : weights;
}

}  // namespace mixt
