// mixt — the command line. Parses arguments with CLI11, dispatches to a subcommand, and
// turns every failure into one clear message and the documented exit code:
// 0 ok, 1 runtime failure, 2 bad usage/recipe/plugin, 130 interrupted.
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "bench.h"
#include "commands.h"
#include "common/closest_match.h"
#include "common/first_line.h"
#include "common/host_allocator.h"
#include "diagnose_command.h"
#include "evaluate_command.h"
#include "export_command.h"
#include "lr_find_command.h"
#include "mixt/error.h"
#include "predict_command.h"
#include "startup_signals.h"
#include "train/out_of_memory.h"
#include "weights_commands.h"

namespace {

constexpr const char* kBestHelp =
    "the run's best checkpoint (checkpoints/best, kept by the best_checkpoint callback) instead of its newest";

int report(const mixt::Error& error) {
  std::string text = "mixt: ";
  if (error.kind() != mixt::ErrorKind::interrupted) text += "error: ";
  text += error.what();
  if (!error.hint().empty()) text += "\n  hint: " + error.hint();
  std::fprintf(stderr, "%s\n", text.c_str());
  return error.exit_code();
}

// CLI11's own words for a bad command line ("A subcommand is required", "The following
// argument was not expected: --epochs", then "Run with --help"), in mixt's error format,
// with what the user most likely meant.
int report_usage(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); })) {
    commands.push_back(command->get_name());
  }
  const auto parsed = app.get_subcommands();
  const std::string command = parsed.empty() ? "" : parsed.front()->get_name();
  std::string message = error.what(), hint;
  // "Could not convert: --batch = abc": mixt's numeric options take whole numbers but one.
  const std::string not_converted = "Could not convert: ";
  if (dynamic_cast<const CLI::ConversionError*>(&error) && message.rfind(not_converted, 0) == 0) {
    const std::size_t equals = message.find(" = ");
    if (equals != std::string::npos) {
      const std::string option = message.substr(not_converted.size(), equals - not_converted.size());
      message = option + ": expected " + (option == "--max-skipped" ? "a number" : "a whole number") + ", got '" +
                message.substr(equals + 3) + "'";
    }
  }
  if (argc == 1) {  // `mixt` alone: what it can do is the answer
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  if (parsed.empty() && argv[1][0] != '-') {
    message = "unknown command '" + std::string(argv[1]) + "'";
    hint = mixt::suggestion_hint(argv[1], commands, "commands");
  } else if (dynamic_cast<const CLI::ExtrasError*>(&error) &&
             (command == "run" || command == "check" || command == "diagnose" || command == "evaluate" ||
              command == "predict" || command == "lr-find")) {
    hint = "recipe settings are key=value overrides, without dashes: trainer.epochs=2 optimizer.lr=0.1";
  } else {
    hint = command.empty() ? "mixt --help lists the commands" : "mixt " + command + " --help shows its usage";
  }
  std::fprintf(stderr, "mixt: error: %s\n  hint: %s\n", message.c_str(), hint.c_str());
  return 2;
}

std::string trim_spaces(const std::string& text) {
  const std::size_t first = text.find_first_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(' ') - first + 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (mixt::cli::end_of_startup()) {
    std::fprintf(stderr, "mixt: interrupted while starting; nothing was done\n");
    return 130;
  }
  // Before the first tensor: LibTorch reads its huge-page switch at its first allocation.
  const char* allocator_setting = std::getenv("MIXT_HOST_ALLOCATOR");
  const auto setting = mixt::parse_host_allocator_setting(allocator_setting ? allocator_setting : "");
  if (!setting) {
    std::fprintf(stderr, "mixt: error: MIXT_HOST_ALLOCATOR=%s: unknown setting\n  hint: %s\n", allocator_setting,
                 mixt::suggestion_hint(allocator_setting, mixt::host_allocator_setting_names(), "settings").c_str());
    return 2;
  }
  mixt::configure_host_allocator(*setting);
  CLI::App app{"mixt — mixed-precision training from YAML recipes and plugins", "mixt"};
  app.require_subcommand(1);
  app.set_version_flag("--version", mixt::cli::version_text());

  std::string recipe, kind, name, glob;
  std::vector<std::string> overrides;

  auto* run = app.add_subcommand("run", "train the model a recipe describes");
  run->add_option("recipe", recipe, "recipe YAML file")->required();
  run->add_option("overrides", overrides, "key=value overrides, e.g. optimizer.lr=0.1 trainer.epochs=2");

  auto* check = app.add_subcommand("check", "validate a recipe: load its plugins, build every component");
  check->add_option("recipe", recipe, "recipe YAML file")->required();
  check->add_option("overrides", overrides, "key=value overrides");

  auto* list = app.add_subcommand("list", "list registered components");
  list->add_option("kind", kind,
                   "model, optimizer, scheduler, precision, dataset or callback (alone: or a name wildcard)");
  list->add_option("glob", glob, "wildcard on the name, e.g. 'resnet*'");
  list->add_option("--recipe", recipe, "also load this recipe's plugins: list, as mixt run does");

  auto* describe = app.add_subcommand("describe", "show a component's (or the trainer's) options and defaults");
  describe->add_option("kind", kind, "component kind, or trainer")->required();
  describe->add_option("name", name, "component name (none for trainer)");
  describe->add_option("--recipe", recipe, "also load this recipe's plugins: list, as mixt run does");

  mixt::cli::BenchOptions bench_options;
  std::string policies;
  auto* bench = app.add_subcommand("bench", "time a recipe under several precision policies, one table");
  bench->add_option("recipe", bench_options.recipe, "recipe YAML file")->required();
  bench->add_option("--precision", policies, "comma-separated policies, e.g. fp32,tf32,amp_fp16,amp_bf16");
  bench->add_option("--steps", bench_options.steps, "timed optimizer steps per policy")->capture_default_str();
  bench->add_option("--warmup", bench_options.warmup, "untimed steps first")->capture_default_str();
  std::int64_t batch = 0;
  bench->add_option("--batch", batch, "batch size (default: the recipe's)");
  std::string checkpointing;
  bench->add_option("--activation-checkpointing", checkpointing,
                    "rows per setting of trainer.activation_checkpointing, e.g. none,all or none,[layer1,layer2]");
  bench->add_option("overrides", bench_options.overrides, "key=value overrides");
  // One policy in a process of its own; `mixt bench` runs it.
  auto* worker = app.add_subcommand("bench-worker", "")->group("");
  worker->add_option("recipe", bench_options.recipe)->required();
  worker->add_option("--precision", policies)->required();
  worker->add_option("--steps", bench_options.steps);
  worker->add_option("--warmup", bench_options.warmup);
  worker->add_option("--batch", batch);
  worker->add_option("overrides", bench_options.overrides);
  mixt::cli::ExportOptions export_options;
  auto* export_ = app.add_subcommand(
      "export", "write a model for deployment: ONNX, TorchScript, or its weights as safetensors (torchvision names)");
  export_
      ->add_option("source", export_options.source,
                   "checkpoint file, run directory or its checkpoints/, or a recipe (its model.weights, if any)")
      ->required();
  export_->add_option("-o,--output", export_options.output, "output file: model.onnx, model.pt, model.safetensors")
      ->required();
  export_->add_option("--format", export_options.format,
                      "onnx, torchscript or safetensors (default: from the output's extension; safetensors "
                      "for other names)");
  export_->add_option("--opset", export_options.opset, "ONNX opset, 17 (the default) to 21");
  export_->add_option("--dtype", export_options.dtype, "ONNX tensors: float32 (the default) or float16");
  export_
      ->add_option("--input-shape", export_options.input_shape,
                   "one sample's shape, e.g. 3,224,224, when the recipe has no data section")
      ->delimiter(',');
  export_->add_flag("--ema", export_options.ema,
                    "the ema callback's average of the weights instead of the model's own");
  export_->add_flag("--best", export_options.best, kBestHelp);
  export_->add_option("overrides", export_options.overrides, "recipe overrides, key=value");

  mixt::cli::PredictOptions predict_options;
  auto* predict = app.add_subcommand(
      "predict", "run trained weights on images (the top classes, by name) or on a tensor (safetensors in and out)");
  predict
      ->add_option("target", predict_options.target,
                   "a run directory, its checkpoints/ or a checkpoint file (each brings its recipe.yaml), or a "
                   "recipe with model.weights=FILE.safetensors")
      ->required();
  predict->add_option("overrides", predict_options.overrides, "key=value overrides, e.g. model.weights=w.safetensors");
  predict->add_option("--image", predict_options.images,
                      "an image file, or a folder of them (walked; repeat for more): decoded by data.val's dataset, "
                      "through its evaluation transforms")
      ->allow_extra_args(false);
  predict->add_option("--transforms", predict_options.transforms,
                      "transforms instead of data.val's, as YAML: a preset (imagenet_eval) or a list");
  predict->add_option("--top-k", predict_options.top_k, "classes shown per image (at most the class count)")
      ->capture_default_str();
  predict->add_option("--batch", predict_options.batch, "images per forward pass")->capture_default_str();
  predict->add_flag("--json", predict_options.json, "the predictions (and the images skipped) as JSON on stdout");
  predict->add_option("--csv", predict_options.csv, "write the predictions to FILE: image,rank,index,class,probability");
  predict->add_flag("--ema", predict_options.ema, "the ema callback's average of the weights (from a checkpoint)");
  predict->add_flag("--best", predict_options.best, kBestHelp);
  predict->add_option("--input", predict_options.input,
                      "instead of --image: a safetensors file with the input batch (N x C x H x W, transformed)");
  predict->add_option("--output", predict_options.output, "with --input: the safetensors file to write the outputs to");

  mixt::cli::EvaluateOptions evaluate_options;
  auto* evaluate = app.add_subcommand("evaluate", "score trained weights on a recipe's data: loss, top-1, top-5");
  evaluate
      ->add_option("target", evaluate_options.target,
                   "a run directory, its checkpoints/ or a checkpoint file (each brings its recipe.yaml), or a "
                   "recipe with model.weights=FILE.safetensors")
      ->required();
  evaluate->add_option("overrides", evaluate_options.overrides, "key=value overrides, as for mixt run");
  evaluate->add_option("--split", evaluate_options.split, "the data.* section to score")->capture_default_str();
  evaluate->add_option("--precision", evaluate_options.precision,
                       "a precision policy instead of the recipe's (with its defaults), e.g. fp32");
  evaluate->add_flag("--ema", evaluate_options.ema, "the ema callback's average of the weights (from a checkpoint)");
  evaluate->add_flag("--best", evaluate_options.best, kBestHelp);
  evaluate->add_flag("--per-class", evaluate_options.per_class, "top-1 accuracy of each class, by name");
  evaluate->add_option("--confusion", evaluate_options.confusion_csv, "write the confusion matrix as CSV to FILE");
  evaluate->add_option("--confusion-png", evaluate_options.confusion_png,
                       "draw the confusion matrix as a PNG heat map");
  evaluate->add_flag("--json", evaluate_options.json, "the figures, per-class accuracy and matrix as JSON on stdout");

  mixt::cli::LrFindOptions lr_find_options;
  auto* lr_find = app.add_subcommand(
      "lr-find", "learning-rate range test: an exponential lr ramp from the recipe's start, the suggested lr");
  lr_find->add_option("recipe", lr_find_options.recipe, "recipe YAML file")->required();
  lr_find->add_option("overrides", lr_find_options.overrides, "key=value overrides, as for mixt run");
  lr_find->add_option("--min", lr_find_options.min_lr, "the ramp's first learning rate")->capture_default_str();
  lr_find->add_option("--max", lr_find_options.max_lr, "its last")->capture_default_str();
  lr_find->add_option("--steps", lr_find_options.steps, "optimizer steps of the ramp (skipped ones not counted)")
      ->capture_default_str();
  lr_find->add_option("--json", lr_find_options.json,
                      "write the curve to FILE (default: <output>/lr-find/<name>.json)");
  lr_find->add_option("--png", lr_find_options.png,
                      "draw the smoothed loss against log lr, suggestion marked, as a PNG");

  mixt::diagnose::DiagnoseOptions diagnose_options;
  bool json = false;
  auto* diagnose = app.add_subcommand(
      "diagnose", "find where a recipe's precision overflows or underflows (float16, float8), and the fix");
  diagnose->add_option("recipe", recipe, "recipe YAML file")->required();
  diagnose->add_option("--steps", diagnose_options.steps, "optimizer steps per run")->capture_default_str();
  diagnose->add_option("--max-trials", diagnose_options.max_trials, "runs the fp32_modules search may make")
      ->capture_default_str();
  diagnose->add_option("--max-skipped", diagnose_options.max_skipped_fraction,
                       "a run skipping more than this fraction of its steps is unhealthy")
      ->capture_default_str();
  diagnose->add_flag("--json", json, "the report as JSON on stdout");
  diagnose->add_option("overrides", overrides, "key=value overrides");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_usage(app, e, argc, argv);
  }

  try {
    if (*run) return mixt::cli::run(recipe, overrides);
    if (*check) return mixt::cli::check(recipe, overrides);
    if (*evaluate) return mixt::cli::evaluate(evaluate_options);
    if (*lr_find) return mixt::cli::lr_find(lr_find_options);
    if (*diagnose) return mixt::cli::diagnose(recipe, overrides, diagnose_options, json);
    if (*list) return mixt::cli::list(kind, glob, recipe);
    if (*describe) return mixt::cli::describe(kind, name, recipe);
    if (*bench || *worker) {
      std::stringstream list(policies);
      for (std::string policy; std::getline(list, policy, ',');) {
        policy = trim_spaces(policy);  // "fp32, amp_bf16" as a shell user quotes it
        if (!policy.empty()) bench_options.policies.push_back(policy);
      }
      if (bench->count("--batch") + worker->count("--batch") > 0) bench_options.batch = batch;
      bench_options.checkpointing = mixt::cli::split_checkpointing_settings(checkpointing);
      return *bench ? mixt::cli::bench(bench_options) : mixt::cli::bench_worker(bench_options);
    }
    if (*export_) return mixt::cli::export_model(export_options);
    if (*predict) {
      for (const char* option : {"--transforms", "--top-k", "--batch", "--json", "--csv"}) {
        if (predict->count(option) > 0) predict_options.image_options_given = true;
      }
      return mixt::cli::predict(predict_options);
    }
  } catch (const mixt::Error& e) {
    return report(e);
  } catch (const c10::OutOfMemoryError& e) {
    return report(mixt::runtime_error("out of memory: " + mixt::first_line(e.what_without_backtrace()),
                                      mixt::kOutOfMemoryHint));
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "mixt: error: LibTorch: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixt: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
