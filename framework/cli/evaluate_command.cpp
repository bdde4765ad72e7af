#include "evaluate_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "experiment/session.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "confusion_heat_map.h"
#include "evaluation_report.h"
#include "mixt/helpers/state_dict.h"
#include "common/interrupt.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTargetHint =
    "name a recipe (.yaml), a run directory (runs/<name>/<timestamp>), its checkpoints/ or a checkpoint file";

// What the argument names: a recipe, or a checkpoint and the recipe its run directory keeps.
struct Target {
  fs::path recipe;
  fs::path checkpoint;  // empty for a recipe: its model.weights (or none)
  fs::path run;         // the run directory, when there is one (its classes.txt)
};

bool is_checkpoint_file(const fs::path& file) {
  char magic[sizeof(kCheckpointMagic)] = {};
  std::ifstream in(file, std::ios::binary);
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kCheckpointMagic, sizeof(magic)) == 0;
}

Target resolve_target(const std::string& argument) {
  std::error_code ec;
  fs::path path(argument);
  if (!fs::exists(path, ec)) throw usage_error(argument + ": no such file or directory", kTargetHint);
  const std::string extension = path.extension().string();
  if (fs::is_regular_file(path, ec) && (extension == ".yaml" || extension == ".yml")) return {path, {}, {}};
  if (fs::is_regular_file(path, ec) && !is_checkpoint_file(path)) {
    throw usage_error(argument + " is neither a recipe (.yaml) nor a mixt checkpoint", kTargetHint);
  }
  Target target;
  target.checkpoint = resolve_checkpoint(path, "mixt evaluate's argument");
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

// The section scored goes to data.val, where the trainer's evaluation reads it; data.train
// stays (it tells the model its input shape and classes) and any other section goes.
void score_split(Recipe& recipe, const std::string& split) {
  RecipeEntry* data = recipe.root->find("data");
  if (!data || !data->value->is_map()) return;  // building the components says what is missing
  std::string sections;
  for (const RecipeEntry& entry : data->value->entries) {
    if (entry.value->type != RecipeNode::Type::null) sections += (sections.empty() ? "" : ", ") + entry.key;
  }
  const RecipeEntry* chosen = data->value->find(split);
  if (!chosen || chosen->value->type == RecipeNode::Type::null) {
    throw usage_error("--split " + split + ": the recipe has no data." + split + " section",
                      sections.empty() ? "add one to the recipe" : "its data sections are " + sections);
  }
  const RecipeEntry scored{"val", chosen->key_where, chosen->value->deep_copy()};
  std::vector<RecipeEntry> kept;
  for (RecipeEntry& entry : data->value->entries) {
    if (entry.key == "train") kept.push_back(entry);
  }
  kept.push_back(scored);
  data->value->entries = std::move(kept);
}

// --precision: the policy with its defaults, as `mixt bench` runs one (the recipe's
// options of another policy would be unknown keys), unless it is the recipe's own.
void use_precision(Recipe& recipe, const std::string& policy) {
  if (policy.empty() || recipe.config().section("precision").string("name", "") == policy) return;
  apply_override(*recipe.root, "precision={name: " + policy + "}");
}

// The run's classes.txt (line i names output i), else the data's names, else "class i".
std::vector<std::string> class_names(const Target& target, const Components& c, std::int64_t classes) {
  std::vector<std::string> names;
  if (!target.run.empty()) {
    std::ifstream file(target.run / "classes.txt");
    for (std::string line; std::getline(file, line);) names.push_back(line);
  }
  if (static_cast<std::int64_t>(names.size()) != classes) names = class_names_of(*c.train);
  if (static_cast<std::int64_t>(names.size()) != classes) {
    names.clear();
    for (std::int64_t i = 0; i < classes; ++i) names.push_back("class " + std::to_string(i));
  }
  return names;
}

// An output file in a directory that does not exist would fail only after the evaluation.
void check_writable(const std::string& option, const std::string& file) {
  if (file.empty()) return;
  const fs::path parent = fs::absolute(file).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    throw usage_error(option + " " + file + ": the directory " + parent.string() + " does not exist",
                      "create it first, or name a file in an existing directory");
  }
}

void write_file(const std::string& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw runtime_error("cannot write " + file + ": " + std::strerror(errno));
}

void load_checkpoint_weights(Components& c, const fs::path& checkpoint, bool ema) {
  CheckpointContents contents = read_checkpoint(checkpoint, c.device);
  const NamedTensors weights = checkpoint_weights(contents, checkpoint, ema);
  try {
    load_state_dict(*c.model, weights, /*strict=*/true, checkpoint.string());
  } catch (const Error& e) {
    throw Error(ErrorKind::recipe, e.message(), e.where(), {},
                "evaluate a checkpoint with the recipe of its run (its run directory's recipe.yaml), without "
                "overrides that change the model");
  }
}

// The model.weights file, as the recipe (or the command line) names it.
std::string recipe_weights(const Recipe& recipe) {
  const RecipeEntry* model = recipe.root->find("model");
  const RecipeEntry* weights = model && model->value->is_map() ? model->value->find("weights") : nullptr;
  return weights ? weights->value->scalar : "";
}

// The recipe to build (the split in data.val, the policy asked for, no trainer.resume) and
// the checkpoint to load: none for a recipe, or when model.weights= names other weights.
struct Plan {
  Recipe recipe;
  fs::path checkpoint;
  bool named_weights = false;  // the model section has weights: (from the recipe or the command line)
};

Plan plan_evaluation(const Target& target, const EvaluateOptions& options) {
  Plan plan;
  plan.recipe = load_recipe(target.recipe, options.overrides);
  use_precision(plan.recipe, options.precision);
  score_split(plan.recipe, options.split);
  // The run's own trainer.resume (a run that resumed another) is not what is evaluated.
  if (RecipeEntry* trainer = plan.recipe.root->find("trainer"); trainer && trainer->value->is_map()) {
    trainer->value->erase("resume");
  }
  plan.named_weights = plan.recipe.config().section("model").has("weights");
  // A run directory with model.weights= on the command line: those weights, under the run's
  // recipe (the recipe.yaml's own model.weights are what the run started from).
  const bool weights_given = std::any_of(options.overrides.begin(), options.overrides.end(),
                                         [](const std::string& o) { return o.rfind("model.weights=", 0) == 0; });
  plan.checkpoint = weights_given ? fs::path() : target.checkpoint;
  if (RecipeEntry* model = plan.recipe.root->find("model");
      !plan.checkpoint.empty() && model && model->value->is_map()) {
    model->value->erase("weights");  // replaced by the checkpoint's: the file may be long gone
  }
  if (options.ema && plan.checkpoint.empty()) {
    throw usage_error("--ema reads the ema callback's average from a checkpoint, not from model.weights",
                      "leave out model.weights=, or export the average with mixt export --ema and name that file");
  }
  return plan;
}

}  // namespace

int evaluate(const EvaluateOptions& options) {
  if (const char* world = std::getenv("WORLD_SIZE"); world && std::atoi(world) > 1) {
    throw usage_error("mixt evaluate runs in one process, not under torchrun (WORLD_SIZE=" + std::string(world) + ")",
                      "run it without torchrun: one process evaluates every sample exactly once");
  }
  if (options.split.empty()) throw usage_error("--split needs a data section's name, e.g. --split val");
  check_writable("--confusion", options.confusion_csv);
  check_writable("--confusion-png", options.confusion_png);
  if (!options.confusion_png.empty()) check_heat_maps_drawable(options.confusion_png);
  const Target target = resolve_target(options.target);
  if (options.ema && target.checkpoint.empty()) {
    throw usage_error(
        "--ema reads the ema callback's average from a checkpoint, and " + options.target + " is a recipe",
        "name the run directory or checkpoint (mixt export --ema writes the average as safetensors)");
  }
  install_interrupt_handlers("mixt: stopping the evaluation (again to quit at once)");

  Plan plan = plan_evaluation(target, options);
  const fs::path& checkpoint = plan.checkpoint;
  const bool named_weights = plan.named_weights;
  Session session;
  Experiment e = session.prepare(std::move(plan.recipe));
  Components& c = e.components;
  if (!c.val) throw usage_error("data." + options.split + " is empty (null)", "name a data section with --split");
  if (!checkpoint.empty()) {
    load_checkpoint_weights(c, checkpoint, options.ema);
  } else if (!named_weights) {
    warn("model.weights is not set: these figures are those of untrained (seed " + std::to_string(e.options.seed) +
         ") weights; name a run directory or checkpoint, or model.weights=FILE.safetensors");
  }
  if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted before the evaluation; nothing was done");

  Progress quiet(false, 1, /*quiet=*/true);
  Trainer trainer(c, e.options, nullptr, quiet);
  const bool wants_matrix =
      options.per_class || options.json || !options.confusion_csv.empty() || !options.confusion_png.empty();
  // On stderr, so that --json's stdout stays one document: a large set takes minutes.
  std::fprintf(stderr, "mixt evaluate: %lld samples of data.%s ...\n", static_cast<long long>(c.val->size()),
               options.split.c_str());
  EvaluationReport report;
  report.evaluation = trainer.evaluate(*c.val, wants_matrix ? &report.confusion : nullptr);
  if (report.evaluation.interrupted) throw Error(ErrorKind::interrupted, "interrupted during the evaluation");
  report.source = !checkpoint.empty() ? checkpoint.string() : named_weights ? recipe_weights(e.recipe) : options.target;
  report.weights = options.ema ? "ema" : "model";
  report.split = options.split;
  for (const ComponentRecord& record : c.records) {
    if (record.kind == "precision") report.precision = record.name;
  }
  if (report.confusion.defined()) report.class_names = class_names(target, c, report.confusion.size(0));

  if (!options.confusion_csv.empty()) {
    write_file(options.confusion_csv, confusion_csv(report.confusion, report.class_names));
  }
  if (!options.confusion_png.empty()) {
    write_confusion_heat_map(options.confusion_png, report.confusion, report.class_names);
  }
  if (options.json) {
    std::printf("%s\n", report_json(report).dump(2).c_str());
  } else {
    std::printf("%s", report_text(report, options.per_class).c_str());
    if (!options.confusion_csv.empty()) std::printf("confusion matrix: %s\n", options.confusion_csv.c_str());
    if (!options.confusion_png.empty()) std::printf("heat map: %s\n", options.confusion_png.c_str());
  }
  return 0;
}

}  // namespace mixt::cli
