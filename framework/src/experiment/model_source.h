// Where `mixt evaluate`, `mixt predict` and `mixt export` take their model from: a recipe
// (its model.weights, if any), or a run directory, its checkpoints/ or a checkpoint file,
// each of which brings the run's resolved recipe.yaml and its classes.txt. The model itself
// is loaded by experiment/inference.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mixt/model.h"
#include "plugins/registry.h"
#include "recipe/recipe_loader.h"

namespace mixt {

// What the command's argument names: a recipe, or a checkpoint and the recipe its run
// directory keeps.
struct ModelTarget {
  std::filesystem::path recipe;
  std::filesystem::path checkpoint;  // empty for a recipe: its model.weights (or none)
  std::filesystem::path run;         // the run directory, when there is one (its classes.txt)
};

// `command` ("evaluate") names the command in errors. A usage error for anything else.
// `best`: the run's best checkpoint (checkpoints/best, kept by the best_checkpoint callback)
// rather than its newest; the argument must then be a run directory or its checkpoints/.
ModelTarget resolve_model_target(const std::string& argument, const std::string& command, bool best = false);

// The recipe to build (no trainer.resume) and the checkpoint to load: none for a recipe,
// or when model.weights= on the command line names other weights (those, under the run's
// recipe: a recipe.yaml's own model.weights are what the run started from, and are
// dropped when a checkpoint replaces them — the file may be long gone).
struct ModelPlan {
  Recipe recipe;
  std::filesystem::path checkpoint;
  bool named_weights = false;  // the model section has weights: or from: (from the recipe or the command line)
};

// `ema`: the ema callback's average will be read from the checkpoint (a usage error
// without one).
ModelPlan plan_model(const ModelTarget& target, const std::vector<std::string>& overrides, bool ema);

// The checkpoint's model weights (or its ema average) loaded strictly into `model`; a
// mismatch is a recipe error.
void load_checkpoint_weights(Model& model, at::Device device, const std::filesystem::path& checkpoint, bool ema);

// The run directory's classes.txt, line i naming output i; empty without one.
std::vector<std::string> run_class_names(const ModelTarget& target);

// The model.weights file, as the recipe (or the command line) names it; empty when none.
std::string recipe_weights(const Recipe& recipe);

// The model.from directory, likewise; empty when none.
std::string recipe_from(const Recipe& recipe);

// The model.tokenizer file, likewise, else model.from's tokenizer; empty when none.
std::string recipe_tokenizer(const Recipe& recipe);

// Where the plan's weights come from, as reports name them: the checkpoint, else the
// model.weights file or model.from directory, else `argument` (the recipe the command was given).
std::string weights_source(const ModelPlan& plan, const std::string& argument);

}  // namespace mixt
