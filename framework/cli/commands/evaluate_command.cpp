#include "commands/evaluate_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/interrupt.h"
#include "experiment/inference.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "files/output_files.h"
#include "reports/confusion_heat_map.h"
#include "reports/evaluation_report.h"
#include "train/evaluator.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

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
std::vector<std::string> class_names(const ModelTarget& target, const Components& c, std::int64_t classes) {
  std::vector<std::string> names = run_class_names(target);
  if (static_cast<std::int64_t>(names.size()) != classes) names = class_names_of(*c.train);
  if (static_cast<std::int64_t>(names.size()) != classes) {
    names.clear();
    for (std::int64_t i = 0; i < classes; ++i) names.push_back("class " + std::to_string(i));
  }
  return names;
}

// The recipe to build: the model's (plan_model), the split in data.val, the policy asked for.
ModelPlan plan_evaluation(const ModelTarget& target, const EvaluateOptions& options) {
  ModelPlan plan = plan_model(target, options.overrides, options.ema);
  use_precision(plan.recipe, options.precision);
  score_split(plan.recipe, options.split);
  return plan;
}

}  // namespace

int evaluate(const EvaluateOptions& options) {
  if (options.split.empty()) throw usage_error("--split needs a data section's name, e.g. --split val");
  check_writable("--confusion", options.confusion_csv);
  check_writable("--confusion-png", options.confusion_png);
  if (!options.confusion_png.empty()) check_heat_maps_drawable(options.confusion_png);
  const ModelTarget target = resolve_model_target(options.target, "evaluate", options.best);
  install_interrupt_handlers("mixt: stopping the evaluation (again to quit at once)");

  ModelPlan plan = plan_evaluation(target, options);
  const std::string source = weights_source(plan, options.target);
  Session session;
  Experiment e = session.prepare(std::move(plan.recipe));
  Components& c = e.components;
  if (!c.val) throw usage_error("data." + options.split + " is empty (null)", "name a data section with --split");
  const Inference inference(c, e.facts, plan, options.ema, e.options.seed);  // the plan's weights, in the built model
  if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted before the evaluation; nothing was done");

  // Under torchrun each rank scores its shard, each sample once (the Evaluator counts no
  // padding), and the figures are summed; rank 0 reports them.
  const Evaluator evaluator(c, e.facts, e.coordinator());

  const bool main_rank = e.main_rank();
  const bool wants_matrix =
      options.per_class || options.json || !options.confusion_csv.empty() || !options.confusion_png.empty();
  // On stderr, so that --json's stdout stays one document: a large set takes minutes.
  if (main_rank && !e.parallel) {
    std::fprintf(stderr, "mixt evaluate: %lld samples of data.%s ...\n", static_cast<long long>(c.val->size()),
                 options.split.c_str());
  } else if (main_rank) {
    std::fprintf(stderr, "mixt evaluate: data.%s over %d ranks ...\n", options.split.c_str(), e.parallel->world_size());
  }
  EvaluationReport report;
  report.evaluation = evaluator.evaluate(*c.val, wants_matrix ? &report.confusion : nullptr);
  if (report.evaluation.interrupted) throw Error(ErrorKind::interrupted, "interrupted during the evaluation");
  if (!main_rank) return 0;
  report.source = source;
  report.weights = options.ema ? "ema" : "model";
  report.split = options.split;
  for (const ComponentRecord& record : e.facts.records) {
    if (record.kind == "precision") report.precision = record.name;
  }
  if (report.confusion.defined()) {
    report.class_names = class_names(target, c, report.confusion.size(0));
    report.per_class_title = c.task->per_class_title();
    report.per_class = c.task->per_class(report.confusion);
  }

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

void add_evaluate_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* command =
      app.add_subcommand("evaluate", "score trained weights on a recipe's data: the loss and the task's figures (top-1, top-5; perplexity)");
  command
      ->add_option("target", o->target,
                   "a run directory, its checkpoints/ or a checkpoint file (each brings its recipe.yaml), or a "
                   "recipe with model.weights=FILE.safetensors")
      ->required();
  command->add_option("overrides", o->overrides, "key=value overrides, as for mixt run");
  command->add_option("--split", o->split, "the data.* section to score")->capture_default_str();
  command->add_option("--precision", o->precision,
                      "a precision policy instead of the recipe's (with its defaults), e.g. fp32");
  command->add_flag("--ema", o->ema, "the ema callback's average of the weights (from a checkpoint)");
  command->add_flag("--best", o->best, kBestHelp);
  command->add_flag("--per-class", o->per_class, "top-1 accuracy of each class, by name");
  command->add_option("--confusion", o->confusion_csv, "write the confusion matrix as CSV to FILE");
  command->add_option("--confusion-png", o->confusion_png, "draw the confusion matrix as a PNG heat map");
  command->add_flag("--json", o->json, "the figures, per-class accuracy and matrix as JSON on stdout");
  commands.push_back({command, [o] { return evaluate(*o); }});
}

}  // namespace mixt::cli
