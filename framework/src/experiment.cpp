#include "experiment.h"

#include <ATen/Parallel.h>

#include <sstream>

#include "mixt/version.h"

namespace mixt {

namespace fs = std::filesystem;

void load_recipe_plugins(const Recipe& recipe, PluginLoader& loader, const Warn& warn) {
  const Config root = recipe.config();
  std::vector<fs::path> required;
  for (const auto& file : root.strings("plugins", {})) {
    fs::path path(file);
    if (path.is_relative()) path = recipe.file.parent_path() / path;
    required.push_back(path);
  }
  load_plugins(loader, required, warn);
}

Experiment prepare_experiment(const fs::path& recipe_file, const std::vector<std::string>& overrides,
                              PluginLoader& loader, Registry& registry, const Warn& warn) {
  Experiment e;
  e.recipe = load_recipe(recipe_file, overrides);
  load_recipe_plugins(e.recipe, loader, warn);
  const Config root = e.recipe.config();
  e.name = root.string("name", recipe_file.stem().string());
  e.output = root.string("output", "runs");
  const Config trainer = root.section("trainer");
  e.options = TrainerOptions::read(trainer);
  if (e.options.threads > 0) at::set_num_threads(static_cast<int>(e.options.threads));
  at::manual_seed(e.options.seed);  // model initialisation depends on it
  e.components = build_components(root, registry, e.options, trainer);
  check_unknown_keys(*e.recipe.root);
  return e;
}

TrainResult run_experiment(Experiment& e, bool terminal, fs::path* run_dir) {
  RunDirectory run(e.output, e.name);
  if (run_dir) *run_dir = run.path();
  std::ostringstream recipe;
  recipe << "# Resolved recipe written by mixt " << version() << " (" << build_fingerprint() << ")\n"
         << "# Re-run with: mixt run " << (run.path() / "recipe.yaml").string() << "\n";
  for (const auto& r : e.components.records) {
    recipe << "# " << r.kind << " " << r.name << ": plugin " << r.plugin << " " << r.plugin_version << " ("
           << r.file << ")\n";
  }
  recipe << to_yaml(*e.recipe.root);
  run.write_text("recipe.yaml", recipe.str());

  Progress progress(terminal, e.options.log_every);
  progress.note("run directory: " + run.path().string());
  Trainer trainer(e.components, e.options, &run, progress);
  if (!e.options.resume.empty()) trainer.resume(e.options.resume);
  return trainer.fit();
}

}  // namespace mixt
