#include "commands/export_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "assembly/components.h"
#include "common/atomic_file.h"
#include "experiment/inference.h"
#include "experiment/model_only.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "export/onnx_file.h"
#include "export/onnx_float16.h"
#include "export/onnx_translation.h"
#include "export/op_listing.h"
#include "export/traced_model.h"
#include "files/export_metadata.h"
#include "files/transformers_export.h"
#include "files/weights_export.h"
#include "mixt/decodes_files.h"
#include "mixt/helpers/nf4.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "mixt/version.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kTraceBatch = 2;
// The batches the traced module is run at against the model before anything is written.
const std::vector<std::int64_t> kCheckBatches{1, 3};
// Beyond this, the traced forward computes something else than the model at another batch.
constexpr double kTraceTolerance = 1e-3;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// What the model is fed, its class names, and the data section whose transforms feed it.
struct ModelInput {
  std::vector<std::int64_t> sample_shape;
  std::vector<std::string> class_names;
  std::int64_t classes = 0;  // the vocabulary of a language model
  std::string split;
  std::string preprocessing;  // the dataset's own description, when it gives one
  // The task's open axes (a token model's sequence stays symbolic in the file) and meanings.
  ExportedInterface exported;
  // Token ids, not floats: a token model's open axis is bounded by its context (its position
  // embeddings); an image model's height and width are not.
  bool integer_input = false;
  InputMaker make_input;
};

// Random inputs of the task's kind: its blank batch tells floats (normal values) from token
// ids (uniform below the vocabulary).
InputMaker input_maker(const Task& task, std::int64_t vocabulary) {
  return [&task, vocabulary](const std::vector<std::int64_t>& shape) {
    const at::Tensor blank = task.blank_inputs(shape, at::kCPU);
    if (at::isFloatingType(blank.scalar_type())) return at::randn(shape);
    return at::randint(0, std::max<std::int64_t>(vocabulary, 1), shape, blank.options());
  };
}

ModelInput model_input(const ExportOptions& options, const ModelTarget& target, const ModelPlan& plan,
                       const Registry& registry, const Task& task, std::uint64_t seed) {
  ModelInput in;
  in.class_names = run_class_names(target);
  const Config data = plan.recipe.config().section("data");
  for (const char* split : {"val", "train"}) {
    if (data.has(split) && in.split.empty()) in.split = split;
  }
  if (!in.split.empty()) {
    const Config section = data.section(in.split);
    const std::unique_ptr<Dataset> dataset =
        registry.make_dataset(section, DatasetContext{kPredictSplit, seed, 0, 1, at::kCPU});
    in.sample_shape = dataset->sample_shape();
    in.classes = dataset->num_classes();
    if (in.class_names.empty()) in.class_names = class_names_of(*dataset);
    in.preprocessing = preprocessing_of(*dataset);
  }
  if (!options.input_shape.empty()) in.sample_shape = options.input_shape;
  if (in.sample_shape.empty()) {
    throw usage_error("the recipe has no data section to take the input shape from",
                      task.predicts_next_token() ? "give a sequence length in tokens, e.g. --input-shape 64"
                                                 : "give one sample's shape, e.g. --input-shape 3,224,224");
  }
  if (!in.class_names.empty()) in.classes = static_cast<std::int64_t>(in.class_names.size());
  in.exported = task.exported();
  in.integer_input = !at::isFloatingType(task.blank_inputs({1}, at::kCPU).scalar_type());
  in.make_input = input_maker(task, in.classes);
  return in;
}

int export_recipe_weights(const ExportOptions& options, const ModelPlan& plan, const std::shared_ptr<Model>& model,
                          bool merged) {
  NamedTensors tensors = merged ? exported_state(*model, /*adapter=*/true) : state_dict(*model);
  for (auto& item : tensors) item.second = item.second.to(at::kCPU).contiguous();
  save_safetensors(options.output, tensors, {{"format", "pt"}, {"source", "mixt " + std::string(version())}});
  std::printf("wrote %zu tensors from %s to %s%s\n", tensors.size(), plan.recipe.file.string().c_str(),
              options.output.c_str(), merged ? ", the adapter merged into the base weights" : "");
  return 0;
}

// --format transformers: the weights (an adapter merged) and model.from's config.json.
int export_transformers(const ExportOptions& options, const ModelPlan& plan, const std::shared_ptr<Model>& model,
                        bool merged) {
  const Config section = plan.recipe.config().section("model");
  const NamedTensors tensors = exported_state(*model, merged);
  write_transformers_folder(options.output, tensors, section.string("from"));
  std::printf("wrote %s (transformers' layout: model.safetensors, %zu tensors, and config.json from %s) from %s%s\n",
              options.output.c_str(), tensors.size(), section.string("from").c_str(), plan.recipe.file.string().c_str(),
              merged ? ", the adapter merged into the base weights" : "");
  return 0;
}

// --merge-adapter, and --format transformers, before anything is built: the recipe has an
// adapter to merge (or, for transformers, at least a model.from to take config.json from).
void check_merge_request(const ExportOptions& options, const std::string& format, const ModelPlan& plan) {
  const Config root = plan.recipe.config();
  if (options.merge_adapter && !root.has("adapter")) {
    throw usage_error("--merge-adapter: " + options.source + "'s recipe has no adapter to merge",
                      "leave out --merge-adapter: the export holds the model's own weights");
  }
  if (format == "transformers") {
    if (!root.section("model").has("from")) {
      throw usage_error("--format transformers takes config.json from the recipe's model.from, which " +
                            options.source + "'s recipe does not set",
                        "export --format safetensors: the weights under transformers' names");
    }
    check_transformers_output(options.output);
  }
}

// The export format, after the checks of the flags that go with it; nothing is read yet.
std::string checked_export_format(const ExportOptions& options) {
  const std::string format = options.format.empty() ? export_format_of(options.output) : lower(options.format);
  if (format != "onnx" && format != "torchscript" && format != "safetensors" && format != "transformers") {
    throw usage_error("unknown export format '" + options.format + "'",
                      "mixt export writes --format onnx, torchscript, safetensors or transformers");
  }
  if (format == "onnx" && (options.opset < 17 || options.opset > 21)) {
    throw usage_error("--opset " + std::to_string(options.opset) + ": mixt writes ONNX opsets 17 to 21",
                      "leave it out for 17, which every current runtime reads");
  }
  if (format != "onnx" && options.opset != 17) throw usage_error("--opset goes with --format onnx");
  if (options.dtype != "float32" && options.dtype != "float16") {
    throw usage_error("--dtype " + options.dtype + ": mixt exports float32 or float16");
  }
  if (options.dtype == "float16" && format != "onnx") {
    throw usage_error("--dtype float16 goes with --format onnx",
                      "a TorchScript file is float32; model.half() after torch.jit.load makes it float16");
  }
  if (format == "safetensors") refuse_pickle_name("-o", options.output, "mixt export");
  return format;
}

struct CheckedTrace {
  TracedModel traced;
  // The largest difference from the model at kCheckBatches.
  double difference = 0;
};

// The model traced at kTraceBatch on a seeded random example, and run at kCheckBatches
// against the model; a token model also at shorter sequences (its time axis is symbolic).
CheckedTrace trace_and_check(const std::shared_ptr<Model>& model, const ModelInput& in,
                             const std::set<std::string>& left_out) {
  std::vector<std::int64_t> example_shape{kTraceBatch};
  example_shape.insert(example_shape.end(), in.sample_shape.begin(), in.sample_shape.end());
  at::manual_seed(0);
  const at::Tensor example = in.make_input(example_shape);
  const auto forward = [&model](const at::Tensor& x) { return model->forward(x); };
  TracedModel traced = trace_model(*model, forward, example, left_out);
  double difference = check_other_sizes(traced, forward, example, in.make_input, VariedAxis{}, kCheckBatches);
  for (const OpenAxis& open : in.exported.open_axes) {
    const std::int64_t traced_size = example.size(open.input_dim);
    if (traced_size <= 1) continue;
    const VariedAxis axis{static_cast<std::size_t>(open.input_dim), open.words};
    difference = std::max(difference,
                          check_other_sizes(traced, forward, example, in.make_input, axis, {1, (traced_size + 1) / 2}));
  }
  if (difference > kTraceTolerance) {
    throw usage_error("the traced forward differs from the model by " + std::to_string(difference) +
                          " at a batch other than the trace's: its control flow or shapes depend on the batch or the "
                          "data, which a trace freezes",
                      "write the forward without data-dependent branches and without x.size(0) in shapes "
                      "(docs/deploy.md, \"What a trace cannot express\")");
  }
  return {std::move(traced), difference};
}

// Writes the traced model as TorchScript or ONNX; returns what was written, for the summary line.
std::string write_traced(const ExportOptions& options, const std::string& format, TracedModel& traced,
                         const std::map<std::string, std::string>& metadata, const ExportedInterface& exported) {
  if (format == "torchscript") {
    write_file_atomically(options.output, [&](std::ostream& out) {
      traced.module.save(out, {{"mixt.json", export_metadata_json(metadata)}});
    });
    return "TorchScript";
  }
  OnnxGraph graph = translate_to_onnx(traced, options.opset);  // refuses before anything is written
  if (options.dtype == "float16") convert_to_float16(graph);
  SymbolicDims symbolic{{{0, "batch"}}, {{0, "batch"}}};
  for (const OpenAxis& open : exported.open_axes) {
    symbolic.input[open.input_dim] = open.name;
    symbolic.output[open.output_dim] = open.name;
  }
  const std::string bytes = onnx_file_bytes(graph, options.opset, metadata, symbolic);
  write_file_atomically(
      options.output, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
  return "ONNX opset " + std::to_string(options.opset) + ", " + options.dtype + ", " +
         std::to_string(graph.initializers.size()) + " initializers";
}

void print_written(const ExportOptions& options, const std::string& summary, const std::string& source,
                   const ModelInput& in, double difference) {
  // "batch x 1 x 28 x 28"; "batch x time (token ids, time up to 64)".
  std::vector<std::string> axes{"batch"};
  for (std::int64_t d : in.sample_shape) axes.push_back(std::to_string(d));
  std::string open_text = in.exported.input_meaning;
  std::string checked = "batches 1 and 3";
  for (const OpenAxis& open : in.exported.open_axes) {
    const std::int64_t traced_size = in.sample_shape.at(static_cast<std::size_t>(open.input_dim - 1));
    axes.at(static_cast<std::size_t>(open.input_dim)) = open.name;
    open_text += (open_text.empty() ? "" : ", ") + open.name + (in.integer_input ? " up to " : " traced at ") +
                 std::to_string(traced_size);
    if (traced_size > 1) checked += " and " + open.words + "s 1 and " + std::to_string((traced_size + 1) / 2);
  }
  std::string shape;
  for (const std::string& axis : axes) shape += (shape.empty() ? "" : " x ") + axis;
  if (!open_text.empty()) shape += " (" + open_text + ")";
  char difference_text[32];
  std::snprintf(difference_text, sizeof(difference_text), "%.2g", difference);
  std::printf(
      "wrote %s (%s) from %s: input %s, traced at batch %lld, equal to the model at %s (largest difference %s)\n",
      options.output.c_str(), summary.c_str(), source.c_str(), shape.c_str(), static_cast<long long>(kTraceBatch),
      checked.c_str(), difference_text);
}

}  // namespace

std::string export_format_of(const std::string& output) {
  const std::string extension = lower(fs::path(output).extension().string());
  if (extension == ".onnx") return "onnx";
  if (extension == ".pt" || extension == ".ts" || extension == ".torchscript") return "torchscript";
  return "safetensors";
}

int export_model(const ExportOptions& options) {
  if (options.output.empty() && !options.list_ops) {
    throw usage_error("mixt export needs -o FILE", "or --list-ops to see the ops the model's forward records");
  }
  if (options.list_ops && !options.output.empty()) throw usage_error("--list-ops writes nothing: leave out -o");
  const std::string format = options.list_ops ? "onnx" : checked_export_format(options);
  if (options.list_ops && (options.opset < 17 || options.opset > 21)) {
    throw usage_error("--opset " + std::to_string(options.opset) + ": mixt writes ONNX opsets 17 to 21");
  }
  const bool recipe_source =
      fs::path(options.source).extension() == ".yaml" || fs::path(options.source).extension() == ".yml";
  if (format == "safetensors" && !recipe_source && options.overrides.empty() && options.input_shape.empty() &&
      !options.merge_adapter) {
    return export_weights(options.source, format, options.output, options.ema, options.best);
  }

  const ModelTarget target = resolve_model_target(options.source, "export", options.best);
  ModelPlan plan = plan_model(target, options.overrides, options.ema);
  check_merge_request(options, format, plan);
  Session session;
  session.load_plugins_of(plan.recipe);
  const InferenceSettings settings = InferenceSettings::read(plan.recipe, at::kCPU);  // traced on the CPU
  const std::unique_ptr<Task> task =
      session.registry().make_task(task_section_of(plan.recipe.config()), TaskContext{at::kCPU, 0});
  const std::string source = weights_source(plan, options.source);
  // A language model's recipe without data: the model says its vocabulary and context.
  std::unique_ptr<ModelOnly> only;
  if (!recipe_has_data(plan.recipe) && options.input_shape.empty() && task->predicts_next_token()) {
    only = std::make_unique<ModelOnly>(build_model_only(plan, session.registry(), options.ema, "export", at::kCPU,
                                                        /*with_precision=*/false));
    if (only->context_length == 0) {
      throw usage_error("the recipe has no data section, and its model does not say how many tokens it takes",
                        "give a sequence length in tokens, e.g. --input-shape 64");
    }
  }
  ExportOptions shaped = options;
  if (only) shaped.input_shape = {only->context_length};
  ModelInput in = model_input(shaped, target, plan, session.registry(), *task, settings.seed);
  if (only) in.classes = only->vocabulary;
  std::unique_ptr<Inference> built;
  if (!only) {
    built = std::make_unique<Inference>(
        plan, session.registry(), settings, in.sample_shape, in.classes,
        ShapeSource{in.split.empty() ? std::string("--input-shape") : "data." + in.split + "'s samples", ""},
        options.ema, "export");
  }
  const Inference& inference = only ? *only->inference : *built;
  const std::shared_ptr<Model>& model = inference.shared_model();
  for (const auto& parameter : model->parameters()) {
    if (held_in_nf4(parameter)) {
      throw usage_error(
          "the model's base is held in NF4 (adapter.quantize_base: nf4): mixt export writes float "
          "weights, which the model no longer has",
          "give PEFT the run's adapter/ folder over model.from's base, or export a LoRA run");
    }
  }
  model->to(at::kFloat);
  // A transformers folder cannot hold an adapter's tensors: it is merged there always.
  const bool merge = inference.adapter() && (options.merge_adapter || format == "transformers");
  if (merge) {
    merge_adapter(*inference.adapter(), plan.recipe.config().section("adapter").string("name"), *model);
  }
  if (format == "safetensors") return export_recipe_weights(options, plan, model, merge);
  if (format == "transformers") return export_transformers(options, plan, model, merge);

  CheckedTrace trace = trace_and_check(model, in, merge ? adapter_parameter_names(*model) : std::set<std::string>{});
  if (options.list_ops) {
    std::printf("ops of %s's forward (traced at batch %lld):\n%s", source.c_str(), static_cast<long long>(kTraceBatch),
                describe_traced_ops(trace.traced, options.opset).c_str());
    return 0;
  }
  ExportFacts facts{source,        in.class_names, in.sample_shape, {}, in.split, false, format,
                    options.opset, options.dtype,  in.preprocessing};
  // The output's sizes as the trace saw it: classes, or a token model's vocabulary, last.
  const auto output_sizes =
      trace.traced.graph->outputs().at(0)->type()->expectRef<c10::TensorType>().sizes().concrete_sizes();
  if (output_sizes) facts.output_shape = *output_sizes;
  facts.exported = in.exported;
  facts.integer_input = in.integer_input;
  facts.channels_last = inference.channels_last();
  facts.model_context = model_context_length(*model);
  const std::map<std::string, std::string> metadata = export_metadata(plan.recipe, facts);

  const std::string summary = write_traced(options, format, trace.traced, metadata, in.exported);
  print_written(options, summary, source, in, trace.difference);
  return 0;
}

void add_export_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export",
      "write a model for deployment: ONNX, TorchScript, or its weights as safetensors (torchvision's or "
      "transformers' names)");
  command
      ->add_option("source", o->source,
                   "checkpoint file, run directory or its checkpoints/, or a recipe (its model.weights, if any)")
      ->required();
  command->add_option("-o,--output", o->output, "output file: model.onnx, model.pt, model.safetensors");
  command->add_option("--format", o->format,
                      "onnx, torchscript, safetensors, or transformers (a folder: model.safetensors and "
                      "model.from's config.json) (default: from the output's extension; safetensors for other "
                      "names)");
  command->add_option("--opset", o->opset, "ONNX opset, 17 (the default) to 21");
  command->add_option("--dtype", o->dtype, "ONNX tensors: float32 (the default) or float16");
  command
      ->add_option("--input-shape", o->input_shape,
                   "one sample's shape, e.g. 3,224,224, when the recipe has no data section")
      ->delimiter(',');
  command->add_flag("--ema", o->ema, "the ema callback's average of the weights instead of the model's own");
  command->add_flag("--best", o->best, kBestHelp);
  command->add_flag("--merge-adapter", o->merge_adapter,
                    "a run with an adapter: merge it into the base weights (PEFT's merge_and_unload), so that "
                    "the file holds those alone (--format transformers always merges)");
  command->add_flag("--list-ops", o->list_ops,
                    "list the ATen ops the model's forward records and their ONNX translations (at --opset); "
                    "write nothing");
  command->add_option("overrides", o->overrides, "recipe overrides, key=value");
  commands.push_back({command, [o] { return export_model(*o); }});
}

}  // namespace mixt::cli
