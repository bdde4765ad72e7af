#include "commands/check_command.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "assembly/model_input.h"
#include "assembly/routing_probe.h"
#include "checkpoint/checkpointer.h"
#include "common/closest_match.h"
#include "common/container_image.h"
#include "common/host_allocator.h"
#include "common/interrupt.h"
#include "experiment/experiment.h"
#include "experiment/model_only.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "mixt/helpers/linear.h"
#include "mixt/tokenizer.h"
#include "mixt/version.h"
#include "plugins/option_table.h"
#include "process/interruptible_start.h"
#include "reports/thousands.h"
#include "train/figure_text.h"

namespace mixt::cli {

namespace fs = std::filesystem;

int run(const std::string& recipe, const std::vector<std::string>& overrides) {
  // Training one step for a checkpoint of nothing would only make the user wait.
  Session session;
  Experiment experiment = prepare_interruptibly(session, recipe, overrides, kStopBeforeTraining, "training started");
  set_interrupt_acknowledgement(launched_as_main_rank() ? kStopAfterStep : nullptr);
  fs::path run_dir;
  const TrainResult result = run_experiment(experiment, ::isatty(STDERR_FILENO) != 0, &run_dir);
  if (!experiment.main_rank()) return 0;  // rank 0 reports
  // samples/s over the training loops, as the step lines show it; evaluation and
  // checkpoints are in the total only.
  const std::string stopped =
      result.stopped_early ? "; stopped early by " + result.stopped_early->by + ": " + result.stopped_early->reason
                           : "";
  const double samples_per_second =
      result.train_seconds > 0 ? static_cast<double>(result.samples) / result.train_seconds : 0.0;
  // A task whose samples hold several predictions (tokens of a window) gives its rate in them.
  char rate[128];
  if (const std::optional<Throughput>& unit = result.throughput) {
    std::snprintf(rate, sizeof(rate), "%lld %s, %.1fs training (%.0f %s/s)",
                  static_cast<long long>(result.samples * unit->per_sample), unit->unit.c_str(), result.train_seconds,
                  samples_per_second * static_cast<double>(unit->per_sample), unit->unit.c_str());
  } else {
    std::snprintf(rate, sizeof(rate), "%.1fs training (%.0f samples/s)", result.train_seconds, samples_per_second);
  }
  std::printf("done: %lld optimizer steps (%lld skipped), %lld samples, %s, %.1fs in all%s\n",
              static_cast<long long>(result.optimizer_steps), static_cast<long long>(result.skipped_steps),
              static_cast<long long>(result.samples), rate, result.elapsed_seconds, stopped.c_str());
  if (result.bad_samples > 0) {
    std::printf("skipped %lld bad samples (undecodable files; the warnings above name the first)\n",
                static_cast<long long>(result.bad_samples));
  }
  if (result.final_eval) {
    const Evaluation& eval = *result.final_eval;
    const std::string task_line = experiment.components.task->summary(eval.loss, eval.figures);
    if (!task_line.empty()) {
      std::printf("%s\n", task_line.c_str());
    } else {
      const std::string figures = figures_text(eval.figures);
      std::printf("validation: loss %.4f%s%s\n", eval.loss, figures.empty() ? "" : ", ", figures.c_str());
    }
  }
  if (!run_dir.empty()) std::printf("run directory: %s\n", run_dir.string().c_str());
  return 0;
}

namespace {

// Counts one layer's forward FLOPs (2 x rows x in x out), then computes it as before.
class CountingLinear : public LinearFunction {
 public:
  CountingLinear(std::shared_ptr<LinearFunction> inner, double& flops) : inner_(std::move(inner)), flops_(flops) {}
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    flops_ += 2.0 * static_cast<double>(input.numel()) * static_cast<double>(weight.size(0));
    return inner_ ? inner_->forward(input, weight, bias) : at::linear(input, weight, bias);
  }

 private:
  std::shared_ptr<LinearFunction> inner_;
  double& flops_;
};

// How many of the model's linear layers (mixt/helpers/linear.h) the precision policy
// computes its own way (float8, for the fp8_* policies), and their share of the linear
// layers' FLOPs in one forward pass of a blank sample.
void print_linear_layers(const Components& c, const std::vector<std::int64_t>& sample_shape) {
  const std::vector<LinearLayer> layers = linear_layers(*c.model);
  if (layers.empty()) return;
  std::vector<double> flops(layers.size(), 0.0);
  std::vector<std::shared_ptr<LinearFunction>> installed;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    installed.push_back(layers[i].owner->linear_function(layers[i].map));
    layers[i].set_function(std::make_shared<CountingLinear>(installed.back(), flops[i]));
  }
  forward_blank_batch(c, sample_shape, /*batch=*/1);
  std::size_t own = 0;
  double own_flops = 0.0, all_flops = 0.0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    layers[i].set_function(installed[i]);
    all_flops += flops[i];
    if (installed[i]) {
      ++own;
      own_flops += flops[i];
    }
  }
  const char* plural = layers.size() == 1 ? "" : "s";
  if (own == 0) {
    std::printf("  linear    %zu layer%s (at::linear)\n", layers.size(), plural);
    return;
  }
  std::printf(
      "  linear    %zu layer%s, %zu computed by the precision policy (float8 under fp8_*): %.1f%% of their "
      "FLOPs\n",
      layers.size(), plural, own, all_flops > 0 ? 100.0 * own_flops / all_flops : 0.0);
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
  const Routing routing = probe_routing(c, /*with_blocks=*/true, choice);
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
    Checkpointer(e.components, e.options, state, e.coordinator())
        .resume(e.options.resume, /*check_data_order=*/e.parallel != nullptr);
  }
  std::printf("%s: ok\n", recipe.c_str());
  for (const auto& r : e.components.records) {
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
  print_linear_layers(e.components, e.components.train->sample_shape());
  print_routing_and_steps(e);
  return 0;
}

namespace {
// The default plugin locations, and a recipe's plugins: when one is given.
void load_plugins_for(Session& session, const std::string& recipe) {
  if (recipe.empty()) {
    session.load_default_plugins();
  } else {
    session.load_plugins_of(load_recipe(recipe, {}));
  }
}
}  // namespace

int list(const std::string& kind, const std::string& glob, const std::string& recipe) {
  Session session;
  load_plugins_for(session, recipe);
  const Registry& registry = session.registry();
  std::optional<ComponentKind> filter;
  std::string pattern = glob.empty() ? "*" : glob;
  // `mixt list 'resnet*'`: one argument that is no kind is a name pattern over every kind;
  // when nothing matches it either, it was a misspelt kind.
  const std::vector<std::string> kinds = [] {
    std::vector<std::string> names;
    for (ComponentKind k : all_kinds()) names.emplace_back(kind_name(k));
    return names;
  }();
  const bool kind_is_pattern = !kind.empty() && glob.empty() && !find_kind(kind);
  if (kind_is_pattern) {
    pattern = kind;
  } else if (!kind.empty()) {
    filter = parse_kind(kind);
  }
  const auto entries = registry.list(filter, pattern);
  if (kind_is_pattern && entries.empty()) {
    throw usage_error("no component kind or name matches '" + kind + "'", suggestion_hint(kind, kinds, "kinds"));
  }
  for (ComponentKind k : all_kinds()) {
    bool header = false;
    for (const ComponentEntry* entry : entries) {
      if (entry->kind != k) continue;
      if (!header) std::printf("%s:\n", kind_name(k));
      header = true;
      std::printf("  %-18s %s\n  %-18s   (%s %s, %s)\n", entry->name.c_str(), entry->info.summary.c_str(), "",
                  entry->origin.name.c_str(), entry->origin.version.c_str(), entry->origin.file.c_str());
    }
  }
  if (entries.empty()) std::printf("no components match\n");
  return 0;
}

namespace {
void print_options(const std::vector<OptionDoc>& options, bool markdown) {
  if (markdown) {  // the docs' tables are these rows (a test holds docs/recipes.md to them)
    std::printf("| option | default | meaning |\n|---|---|---|\n%s", option_table_rows(options).c_str());
    return;
  }
  if (options.empty()) {
    std::printf("options: none\n");
    return;
  }
  int width = 22;
  for (const OptionDoc& option : options) width = std::max(width, static_cast<int>(option.name.size()));
  std::printf("options:\n");
  for (const OptionDoc& option : options) {
    const std::string value = option.default_value.empty() ? "(required)" : option.default_value;
    std::printf("  %-*s %-12s %s\n", width, option.name.c_str(), value.c_str(), option.help.c_str());
  }
}
}  // namespace

int describe(const std::string& kind_text, const std::string& name, const std::string& recipe, bool markdown) {
  // The trainer is no plugin, but its options are looked up the same way.
  if (kind_text == "trainer") {
    if (!markdown) std::printf("trainer — the training loop (the recipe's trainer: section)\n\n");
    print_options(trainer_option_docs(), markdown);
    return 0;
  }
  const ComponentKind kind = parse_kind(kind_text);  // `mixt describe bogus`: the kind is what is wrong
  if (name.empty()) {
    throw usage_error("mixt describe " + kind_text + " needs a name", "mixt list " + kind_text + " shows them");
  }
  Session session;
  load_plugins_for(session, recipe);
  const Registry& registry = session.registry();
  const ComponentEntry* entry = registry.find(kind, name);
  if (!entry) {
    throw usage_error("unknown " + kind_text + " '" + name + "'",
                      suggestion_hint(name, registry.names(kind), "known " + kind_text + "s") +
                          "; mixt list and describe see a plugin of your own when its .so (or its directory) is "
                          "on MIXT_PLUGIN_PATH, or with --recipe FILE naming it in plugins:");
  }
  if (!markdown) {
    std::printf("%s %s — %s\n", kind_text.c_str(), entry->name.c_str(), entry->info.summary.c_str());
    std::printf("plugin: %s %s (%s)\n\n", entry->origin.name.c_str(), entry->origin.version.c_str(),
                entry->origin.file.c_str());
  }
  std::vector<OptionDoc> options = entry->info.options;
  for (const OptionDoc& framework : framework_option_docs(kind)) {  // unless the plugin lists them itself
    const auto listed = [&](const OptionDoc& option) { return option.name == framework.name; };
    if (std::none_of(options.begin(), options.end(), listed)) options.push_back(framework);
  }
  print_options(options, markdown);
  return 0;
}

std::string version_text() {
  const auto& cuda = at::detail::getCUDAHooks();
  std::string text = std::string("mixt ") + version() + "\nLibTorch " + TORCH_VERSION + "\n";
  const long cudart = cuda.versionCUDART();
  if (cudart > 0) {
    text += "CUDA " + std::to_string(cudart / 1000) + "." + std::to_string((cudart % 1000) / 10) + " (" +
            std::to_string(cuda.hasCUDA() ? cuda.getNumGPUs() : 0) + " GPU(s) usable)\n";
  } else {
    text += "CUDA: not in this LibTorch build\n";
  }
  text += std::string("plugin ABI ") + MIXT_STRINGIFY(MIXT_ABI_MAJOR) "." MIXT_STRINGIFY(MIXT_ABI_MINOR) + " [" +
          build_fingerprint() + "]\n";
  text += "host allocator: " + host_allocator().summary() + "\n";
  if (const std::string image = container_image(); !image.empty()) text += "container image: " + image + "\n";
  return text;
}

namespace {
// A recipe and its key=value overrides: what run and check take.
struct RecipeArguments {
  std::string recipe;
  std::vector<std::string> overrides;
};
}  // namespace

void add_run_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<RecipeArguments>();
  CLI::App* run_app = app.add_subcommand("run", "train the model a recipe describes");
  run_app->add_option("recipe", args->recipe, "recipe YAML file")->required();
  run_app->add_option("overrides", args->overrides, "key=value overrides, e.g. optimizer.lr=0.1 trainer.epochs=2");
  commands.push_back({run_app, [args] { return run(args->recipe, args->overrides); }});
}

void add_check_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<RecipeArguments>();
  CLI::App* check_app = app.add_subcommand("check", "validate a recipe: load its plugins, build every component");
  check_app->add_option("recipe", args->recipe, "recipe YAML file")->required();
  check_app->add_option("overrides", args->overrides, "key=value overrides");
  commands.push_back({check_app, [args] { return check(args->recipe, args->overrides); }});
}

void add_list_command(CLI::App& app, Commands& commands) {
  struct Arguments {
    std::string kind, glob, recipe;
  };
  auto args = std::make_shared<Arguments>();
  CLI::App* list_app = app.add_subcommand("list", "list registered components");
  list_app->add_option("kind", args->kind,
                       "model, optimizer, scheduler, precision, dataset or callback (alone: or a name wildcard)");
  list_app->add_option("glob", args->glob, "wildcard on the name, e.g. 'resnet*'");
  list_app->add_option("--recipe", args->recipe, "also load this recipe's plugins: list, as mixt run does");
  commands.push_back({list_app, [args] { return list(args->kind, args->glob, args->recipe); }});
}

void add_describe_command(CLI::App& app, Commands& commands) {
  struct Arguments {
    std::string kind, name, recipe;
    bool markdown = false;
  };
  auto args = std::make_shared<Arguments>();
  CLI::App* describe_app = app.add_subcommand("describe", "show a component's (or the trainer's) options and defaults");
  describe_app->add_option("kind", args->kind, "component kind, or trainer")->required();
  describe_app->add_option("name", args->name, "component name (none for trainer)");
  describe_app->add_option("--recipe", args->recipe, "also load this recipe's plugins: list, as mixt run does");
  describe_app->add_flag("--markdown", args->markdown, "the options as a Markdown table, as the docs show them");
  commands.push_back({describe_app, [args] { return describe(args->kind, args->name, args->recipe, args->markdown); }});
}

}  // namespace mixt::cli
