// What every mixt command starts from: the registry and the plugin loader that fills it.
// A command that runs a recipe prepares an Experiment from it here (experiment.h: the
// resolved recipe, the run's facts worked out once — name, output, device, data order,
// steps per epoch —, the components, the coordinator); `evaluate`, `predict` and `export`
// then load their model through an Inference (inference.h). Warnings go through the one
// channel of warnings.h.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "plugins/plugin_loader.h"
#include "plugins/registry.h"
#include "common/warnings.h"

namespace mixt {

class Session {
 public:
  Session() : loader_(registry_) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Registry& registry() { return registry_; }
  PluginLoader& loader() { return loader_; }

  // The default plugin locations: the build's or install's plugin directory, MIXT_PLUGIN_PATH.
  void load_default_plugins() { load_plugins(loader_, {}, warn); }
  // Those and a recipe's `plugins:`, as `mixt run` loads them.
  void load_plugins_of(const Recipe& recipe) { load_recipe_plugins(recipe, loader_, warn); }
  // The plugins of the recipe file `recipe` (its `plugins:` too), or the defaults when it is
  // empty: what `mixt list` and `mixt describe --recipe` show.
  void load_plugins_for(const std::string& recipe) {
    if (recipe.empty()) {
      load_default_plugins();
    } else {
      load_plugins_of(load_recipe(recipe, {}));
    }
  }
  // Loads the recipe's plugins and builds its components.
  Experiment prepare(const std::filesystem::path& recipe, const std::vector<std::string>& overrides) {
    return prepare_experiment(recipe, overrides, loader_, registry_, warn);
  }
  Experiment prepare(Recipe recipe) { return prepare_experiment(std::move(recipe), loader_, registry_, warn); }

 private:
  Registry registry_;
  PluginLoader loader_;
};

}  // namespace mixt
