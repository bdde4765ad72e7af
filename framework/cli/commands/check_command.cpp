#include "commands/check_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "analysis/linear_flops.h"
#include "assembly/model_input.h"
#include "assembly/routing_probe.h"
#include "checkpoint/checkpointer.h"
#include "experiment/experiment.h"
#include "experiment/model_only.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "mixt/tokenizer.h"
#include "reports/thousands.h"

namespace mixt::cli {

namespace {

// How many of the model's linear layers (mixt/helpers/linear.h) the precision policy
// computes its own way (float8, for the fp8_* policies), and their share of the linear
// layers' FLOPs in one forward pass of a blank sample.
void print_linear_layers(const Components& c, const RunFacts& facts, const std::vector<std::int64_t>& sample_shape) {
  const LinearFlops count =
      count_linear_flops(*c.model, [&] { forward_blank_batch(c, facts, sample_shape, /*batch=*/1); });
  if (count.layers == 0) return;
  const char* plural = count.layers == 1 ? "" : "s";
  if (count.policy_layers == 0) {
    std::printf("  linear    %zu layer%s (at::linear)\n", count.layers, plural);
    return;
  }
  std::printf(
      "  linear    %zu layer%s, %zu computed by the precision policy (float8 under fp8_*): %.1f%% of their "
      "FLOPs\n",
      count.layers, plural, count.policy_layers, count.flops > 0 ? 100.0 * count.policy_flops / count.flops : 0.0);
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

// What the model routes (the names fp32_modules and activation_checkpointing can take), what
// the recipe recomputes and keeps in float32, and the epoch's optimizer steps.
void print_routing_and_steps(const Experiment& e) {
  const Components& c = e.components;
  const ActivationCheckpointing& choice = e.options.activation_checkpointing;
  const Routing routing = probe_routing(c, e.facts, /*with_blocks=*/true, choice);
  if (!c.train->sample_shape().empty()) {
    if (routing.routed.empty()) {
      std::printf("  routed    none (fp32_modules and activation_checkpointing need mixt::call_submodule)\n");
    } else {
      std::printf("  routed    %zu through mixt::call_submodule: %s\n", routing.routed.size(),
                  joined(routing.routed).c_str());
      std::printf("  blocks    %zu through mixt::call_block: %s\n", routing.blocks.size(),
                  joined(routing.blocks).c_str());
    }
    const std::vector<std::string>& recomputed = choice.all_blocks ? routing.blocks : choice.names;
    std::printf("  recompute %s (trainer.activation_checkpointing)\n", joined(recomputed).c_str());
    std::printf("  fp32      %s (precision.fp32_modules)\n",
                joined(e.recipe.config().section("precision").strings("fp32_modules", {})).c_str());
  }
  const std::int64_t batches = e.facts.batches_per_epoch, steps = e.facts.steps_per_epoch;
  std::string why = std::to_string(batches) + " batch" + (batches == 1 ? "" : "es");
  if (e.options.accumulate > 1) why += ", " + std::to_string(e.options.accumulate) + " per step (trainer.accumulate)";
  if (e.options.max_steps_per_epoch > 0 && steps == e.options.max_steps_per_epoch) {
    why += ", at most " + std::to_string(steps) + " (trainer.max_steps_per_epoch)";
  }
  std::printf("  steps     %lld optimizer step%s per epoch (%s), %lld epoch%s\n", static_cast<long long>(steps),
              steps == 1 ? "" : "s", why.c_str(), static_cast<long long>(e.options.epochs),
              e.options.epochs == 1 ? "" : "s");
}

}  // namespace
namespace {

std::int64_t parameter_count(Model& model) {
  std::int64_t parameters = 0;
  for (const at::Tensor& p : model.parameters()) parameters += p.numel();
  return parameters;
}

// A language model's recipe without data: the model alone, and what it says of itself
// (experiment/model_only.h).
int check_model_only(const std::string& recipe, Recipe loaded, Session& session) {
  ModelPlan plan;
  plan.recipe = std::move(loaded);
  const Config model = plan.recipe.config().section("model");
  plan.named_weights = model.has("weights") || model.has("from");
  const ModelOnly only = build_model_only(plan, session.registry(), false, "check");
  const Task& task = *only.task;
  std::printf("%s: ok for mixt generate and mixt export (no data section: mixt run needs data.train)\n",
              recipe.c_str());
  std::printf("  model     %s parameters\n", with_thousands(parameter_count(only.inference->model())).c_str());
  if (task.predicts_next_token()) {
    std::printf("  predicts  the next token of %s", task.describe_classes(only.vocabulary).c_str());
    if (only.context_length > 0) std::printf(", up to %lld tokens", static_cast<long long>(only.context_length));
    std::printf("\n");
  }
  const std::string tokenizer = recipe_tokenizer(plan.recipe);
  if (!tokenizer.empty()) std::printf("  tokenizer %s\n", load_tokenizer(tokenizer)->describe().c_str());
  return 0;
}

}  // namespace

int check(const std::string& recipe, const std::vector<std::string>& overrides) {
  Recipe loaded = load_recipe(recipe, overrides);  // once: the recipe may come from a pipe
  Session session;
  if (!recipe_has_data(loaded)) {
    session.load_plugins_of(loaded);
    const std::unique_ptr<Task> task =
        session.registry().make_task(task_section_of(loaded.config()), TaskContext{at::kCPU, 0});
    if (task->predicts_next_token()) return check_model_only(recipe, std::move(loaded), session);
  }
  // Building the components proves the model takes the data (a forward pass on a blank batch).
  Experiment e = session.prepare(std::move(loaded));
  // A trainer.resume that names no checkpoint, or one that does not fit the recipe's model,
  // is a recipe error `run` would give: read it as `run` will (nothing is written).
  if (!e.options.resume.empty()) {
    TrainState state;
    Checkpointer(e.components, e.facts, e.options, state, e.coordinator())
        .resume(e.options.resume, /*check_data_order=*/e.parallel != nullptr);
  }
  std::printf("%s: ok\n", recipe.c_str());
  for (const auto& r : e.facts.records) {
    std::printf("  %-9s %-16s plugin %s %s\n", r.kind.c_str(), r.name.c_str(), r.plugin.c_str(),
                r.plugin_version.c_str());
  }
  // What the data sections found: the first thing to look at for an image folder.
  // A language model's samples are token windows: its "classes" are the vocabulary.
  const Task& task = *e.components.task;
  const auto describe_data = [&task](const char* split, Dataset& data) {
    const std::string classes = task.describe_classes(data.num_classes());
    std::printf("  data.%-5s %lld samples, %s, each %s; %lld batch%s per epoch\n", split,
                static_cast<long long>(data.size()), classes.c_str(),
                c10::str(at::IntArrayRef(data.sample_shape())).c_str(),
                static_cast<long long>(data.batches_per_epoch()), data.batches_per_epoch() == 1 ? "" : "es");
    // The label order, to spot a stray folder (.ipynb_checkpoints would be class 0).
    const std::vector<std::string> names = class_names_of(data);
    if (names.empty()) return;
    std::string listed;
    for (std::size_t i = 0; i < names.size() && i < 10; ++i) listed += (i ? ", " : "") + names[i];
    if (names.size() > 10) listed += ", ... " + names.back();
    std::printf("              classes: %s\n", listed.c_str());
  };
  describe_data("train", *e.components.train);
  if (e.components.val) describe_data("val", *e.components.val);
  std::printf("  model     %s parameters\n", with_thousands(parameter_count(*e.components.model)).c_str());
  print_linear_layers(e.components, e.facts, e.components.train->sample_shape());
  print_routing_and_steps(e);
  return 0;
}

void add_check_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<RecipeArguments>();
  CLI::App* check_app = app.add_subcommand("check", "validate a recipe: load its plugins, build every component");
  check_app->add_option("recipe", args->recipe, "recipe YAML file")->required();
  check_app->add_option("overrides", args->overrides, "key=value overrides");
  commands.push_back({check_app, [args] { return check(args->recipe, args->overrides); }});
}

}  // namespace mixt::cli
