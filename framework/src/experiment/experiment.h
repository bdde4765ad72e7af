// From a recipe file to a trained model: load plugins, build components, check that every
// recipe key was understood, then train with outputs in a run directory. Shared by
// `mixt run` and `mixt check` (and by the end-to-end tests).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "distributed/data_parallel.h"
#include "mixt/options.h"
#include "plugins/plugin_loader.h"
#include "plugins/registry.h"
#include "recipe/recipe_loader.h"
#include "train/trainer.h"

namespace mixt {

// The recipe's top-level `output:`, read by `mixt run` and `mixt bench` alike.
inline const Option<std::string> kRecipeOutput{"output", "runs", "directory for run directories"};

using Warn = std::function<void(const std::string&)>;

struct Experiment {
  Recipe recipe;
  // What every command knows about the run (assembly/run_facts.h), worked out once as the
  // experiment is prepared; handed next to `components` to whatever reads a fact.
  RunFacts facts;
  TrainerOptions options;
  Components components;
  // data.train's class count when the model takes num_classes and the recipe leaves it to
  // the data (0 otherwise): the run directory's recipe.yaml states it.
  std::int64_t implied_num_classes = 0;
  // Set when launched by torchrun (RANK/WORLD_SIZE in the environment): the process group.
  std::unique_ptr<distributed::DataParallel> parallel;

  // The process group under torchrun, else a single process (no-op barriers, identity sums).
  Coordinator& coordinator() const;
  // Rank 0, or the only process: the one that reports and writes.
  bool main_rank() const { return !parallel || parallel->is_main(); }
};

// Loads the default plugin locations and the recipe's `plugins:` (each relative to the
// recipe file that names it; an override's to the working directory).
void load_recipe_plugins(const Recipe& recipe, PluginLoader& loader, const Warn& warn);

// Loads plugins, seeds, builds every component, and rejects keys nobody read.
Experiment prepare_experiment(const std::filesystem::path& recipe_file,
                              const std::vector<std::string>& overrides, PluginLoader& loader,
                              Registry& registry, const Warn& warn);
// The same for a recipe already loaded (and edited: `mixt evaluate` names the split it scores).
Experiment prepare_experiment(Recipe recipe, PluginLoader& loader, Registry& registry, const Warn& warn);

// Trains; writes the run directory (rank 0 only, in a distributed run). Returns the result
// and the run directory. Under torchelastic, the first attempt makes a new run directory,
// records it in the elastic agent's store (and links runs/<name>/elastic-<TORCHELASTIC_RUN_ID>
// to it); a restarted attempt reopens it and resumes from its newest checkpoint.
TrainResult run_experiment(Experiment& experiment, bool terminal, std::filesystem::path* run_dir = nullptr);

}  // namespace mixt
