#include "experiment/experiment.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "assembly/adapters.h"
#include "assembly/quantize_base.h"
#include "checkpoint/checkpoint.h"
#include "common/container_image.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/master_weights.h"
#include "mixt/version.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

// The recipe's `plugins:`, each relative path resolved against the directory of the file
// that names it (a base file's own, so a base in another directory keeps its plugins) or,
// for a command-line override, the working directory.
std::vector<fs::path> recipe_plugin_files(const Recipe& recipe) {
  recipe.config().strings("plugins", {});  // a list of strings, or a recipe error at it
  std::vector<fs::path> files;
  const RecipeEntry* plugins = recipe.root->find("plugins");
  if (!plugins) return files;
  for (const RecipeNodePtr& item : plugins->value->items) {
    fs::path path(item->scalar);
    if (path.is_relative() && !from_command_line(item->where)) {
      path = (item->where.known() ? fs::path(item->where.file) : recipe.file).parent_path() / path;
    }
    files.push_back(path);
  }
  return files;
}

}  // namespace

void load_recipe_plugins(const Recipe& recipe, PluginLoader& loader, const Warn& warn) {
  const std::vector<fs::path> files = recipe_plugin_files(recipe);
  // A path that names nothing is the recipe's mistake, at its place and as it was written.
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    if (fs::exists(files[i], ec)) continue;
    const RecipeNode& item = *recipe.root->find("plugins")->value->items[i];
    throw recipe_error("plugin '" + item.scalar + "' does not exist" +
                           (item.scalar == files[i].string() ? "" : " (looked for " + files[i].string() + ")"),
                       item.where, "plugins[" + std::to_string(i) + "]",
                       "plugins: paths are relative to the recipe file that names them; build the plugin first");
  }
  load_plugins(loader, files, warn);
}

namespace {
// The start-up line's end: what a sharded run splits besides the optimizer state.
std::string kept_besides(distributed::Sharding mode, PrecisionPolicy& precision) {
  std::vector<std::string> kept;
  if (mode == distributed::Sharding::gradients || mode == distributed::Sharding::parameters) {
    kept.emplace_back("gradients");
  }
  if (mode == distributed::Sharding::parameters) kept.emplace_back("blocks' weights");
  auto* masters = dynamic_cast<ShardableMasters*>(&precision);
  if (masters && masters->master_weights().on_shards()) kept.emplace_back("float32 masters");
  std::string text;
  for (std::size_t i = 0; i < kept.size(); ++i) text += (i + 1 == kept.size() ? " and " : ", ") + kept[i];
  return text + ")";
}

// One directory under output: "" or ".." would put run directories beside other runs' or
// above the output directory. A directory name is at most 255 bytes on common filesystems:
// `check` passed a longer one that `run` then failed to create (exit 1).
void check_run_name(const Config& root, const std::string& name) {
  if (name.size() > 200) {
    root.fail("name", "the run name is " + std::to_string(name.size()) + " bytes long; at most 200",
              "use a shorter name: it becomes a directory name");
  }
  // A newline makes a directory name no listing shows right; a NUL cut the name short at
  // the system call, which then kept finding the directory "already there".
  const auto control = std::find_if(name.begin(), name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  if (control != name.end()) {
    root.fail("name", "the run name holds a control character (code " + std::to_string(static_cast<int>(*control)) +
                          "): it becomes a directory name",
              "use letters, digits, '-', '_' and '.'");
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    root.fail("name", "'" + name + "' is not a run name: runs go to <output>/<name>/<timestamp>/",
              "use one directory name, e.g. resnet50-amp; to group runs, set output: (e.g. output: runs/resnet50)");
  }
}

// The loader keys of data.train that change which samples a batch number holds (workers,
// prefetch and the index cache do not), read from the tree so that no key becomes "known".
std::string train_order_keys(const RecipeNode& root) {
  const RecipeEntry* data = root.find("data");
  const RecipeEntry* train = data && data->value->is_map() ? data->value->find("train") : nullptr;
  if (!train || !train->value->is_map()) return "";
  std::vector<std::string> keys;
  for (const std::string key : {"shuffle", "drop_last", "limit", "split"}) {
    const RecipeEntry* entry = train->value->find(key);
    if (entry && entry->value->type == RecipeNode::Type::scalar) keys.push_back(key + "=" + entry->value->scalar);
  }
  std::string joined;
  for (const std::string& key : keys) joined += (joined.empty() ? "" : ", ") + key;
  return joined;
}
}  // namespace

Coordinator& Experiment::coordinator() const {
  static SingleProcess single_process;  // stateless: one serves every experiment
  return parallel ? static_cast<Coordinator&>(*parallel) : single_process;
}

Experiment prepare_experiment(const fs::path& recipe_file, const std::vector<std::string>& overrides,
                              PluginLoader& loader, Registry& registry, const Warn& warn) {
  return prepare_experiment(load_recipe(recipe_file, overrides), loader, registry, warn);
}

Experiment prepare_experiment(Recipe recipe, PluginLoader& loader, Registry& registry, const Warn& warn) {
  Experiment e;
  e.recipe = std::move(recipe);
  load_recipe_plugins(e.recipe, loader, warn);
  const Config root = e.recipe.config();
  RunFacts& facts = e.facts;
  facts.name = root.string("name", e.recipe.file.stem().string());
  check_run_name(root, facts.name);
  facts.output = kRecipeOutput.read(root);
  if (std::any_of(facts.output.native().begin(), facts.output.native().end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    root.fail("output", "the path holds a control character", "name the directory for run directories plainly");
  }
  std::error_code ec;
  if (fs::exists(facts.output, ec) && !fs::is_directory(facts.output, ec)) {
    root.fail("output", "'" + facts.output.string() + "' is a file, not a directory",
              "name the directory for run directories (created when missing)");
  }
  facts.data_order = train_order_keys(*e.recipe.root);
  const Config trainer = root.section("trainer");
  e.options = TrainerOptions::read(trainer);
  // A resume path that names no checkpoint is a recipe mistake `mixt check` should catch.
  if (!e.options.resume.empty()) {
    e.options.resume = resolve_checkpoint(e.options.resume, "trainer.resume", trainer.location("resume")).string();
  }
  // Invalid on every machine, so `mixt check` says so too, not only a torchrun launch.
  if (e.options.distributed.backend == "nccl" && e.options.device == "cpu") {
    trainer.section("distributed").fail("backend", "nccl needs a CUDA device, but trainer.device is cpu",
                                        "use backend: gloo (or auto) on CPUs");
  }
  if (e.options.threads > 0) at::set_num_threads(static_cast<int>(e.options.threads));
  // Once, before anything is built: the process group needs it as much as the components.
  facts.device = resolve_device(e.options.device, trainer);
  if (auto launch = distributed::LaunchEnvironment::from_process_environment()) {
    // Each rank trains on the GPU of its LOCAL_RANK (or on the CPU).
    if (facts.device.is_cuda()) {
      if (static_cast<std::size_t>(launch->local_rank) >= at::getNumGPUs()) {
        throw usage_error("LOCAL_RANK=" + std::to_string(launch->local_rank) + ", but this machine has " +
                              std::to_string(at::getNumGPUs()) + " usable GPU(s)",
                          "start at most one rank per GPU (torchrun --nproc-per-node), or use trainer.device: cpu");
      }
      facts.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(launch->local_rank));
    }
    e.parallel = std::make_unique<distributed::DataParallel>(*launch, e.options.distributed, facts.device);
    e.parallel->check_same_recipe(to_yaml(*e.recipe.root));
  }
  at::manual_seed(e.options.seed);  // model initialisation depends on it
  e.components =
      build_components(root, registry, e.options, trainer, facts, e.parallel ? &e.parallel->communicator() : nullptr);
  check_unknown_keys(*e.recipe.root);
  if (e.parallel) e.parallel->set_parameters(e.components.model->parameters(/*recurse=*/true));
  const Config model = root.section("model");
  const std::vector<OptionDoc>& model_options = registry.find(ComponentKind::model, model).info.options;
  const bool takes_num_classes = std::any_of(model_options.begin(), model_options.end(),
                                             [](const OptionDoc& option) { return option.name == "num_classes"; });
  if (takes_num_classes && !model.has("num_classes")) e.implied_num_classes = e.components.train->num_classes();
  return e;
}

namespace {

// The adapter in PEFT's layout, RUN/adapter/: adapter_model.safetensors and
// adapter_config.json, which peft.PeftModel.from_pretrained(model.from's model, RUN/adapter) loads.
void write_run_adapter(const Experiment& e, const fs::path& run_path) {
  const Config model = e.recipe.config().section("model");
  const std::string base = model.has("from") ? model.string("from") : "";
  std::string task_type;
  for (const auto& r : e.facts.records) {
    if (r.kind == "task" && r.name == "causal_lm") task_type = "CAUSAL_LM";
  }
  write_peft_adapter(run_path / "adapter", *e.components.adapter, *e.components.model, base, task_type);
}

// "adapter lora: 12,288 trainable parameters of 1,234,567 (1.00 %), the rest frozen".
std::string adapter_note(const Experiment& e) {
  std::int64_t trainable = 0, all = 0;
  for (const auto& parameter : e.components.model->parameters()) {
    all += parameter.numel();
    if (parameter.requires_grad()) trainable += parameter.numel();
  }
  std::string name;
  for (const auto& r : e.facts.records) {
    if (r.kind == "adapter") name = r.name;
  }
  const std::string quantized = quantized_base_note(*e.components.model);
  char share[32];
  std::snprintf(share, sizeof share, "%.2f %%",
                all > 0 ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0);
  return "adapter " + name + ": " + std::to_string(trainable) + " trainable parameters of " + std::to_string(all) +
         " (" + share + "), the rest frozen" + (quantized.empty() ? "" : "; " + quantized) +
         "; written to adapter/ in PEFT's layout when training ends";
}

void write_resolved_recipe(const Experiment& e, const RunDirectory& run) {
  std::ostringstream recipe;
  recipe << "# Resolved recipe written by mixt " << version() << " (" << build_fingerprint() << ")\n"
         << "# Re-run with: mixt run " << (run.path() / "recipe.yaml").string() << "\n";
  if (const std::string image = container_image(); !image.empty()) recipe << "# Ran in container image " << image << "\n";
  for (const auto& r : e.facts.records) {
    recipe << "# " << r.kind << " " << r.name << ": plugin " << r.plugin << " " << r.plugin_version << " ("
           << r.file << ")\n";
  }
  // Absolute plugin paths: relative ones would be read against the run directory.
  const RecipeNodePtr resolved = e.recipe.root->deep_copy();
  // A name taken from the file name would become "recipe" when this file is run.
  const RecipeEntry* name = resolved->find("name");
  if (!name || name->value->type != RecipeNode::Type::scalar) {
    resolved->erase("name");
    auto value = std::make_shared<RecipeNode>();
    value->type = RecipeNode::Type::scalar;
    value->scalar = e.facts.name;
    value->quoted = true;
    resolved->entries.insert(resolved->entries.begin(), {"name", {}, value});
  }
  if (RecipeEntry* plugins = resolved->find("plugins")) {
    const std::vector<fs::path> files = recipe_plugin_files(e.recipe);
    for (std::size_t i = 0; i < files.size(); ++i) {
      plugins->value->items[i]->scalar = fs::absolute(files[i]).lexically_normal().string();
      plugins->value->items[i]->quoted = true;
    }
  }
  // A model that takes its class count from data.train gets it written down: mixt predict
  // does not open the datasets, and would build the model's default head (1000 classes).
  if (e.implied_num_classes > 0) {
    RecipeNode& model = *resolved->find("model")->value;
    auto count = std::make_shared<RecipeNode>();
    count->type = RecipeNode::Type::scalar;
    count->scalar = std::to_string(e.implied_num_classes);
    model.entries.push_back({"num_classes", {}, count});
    recipe << "# model.num_classes: " << e.implied_num_classes << ", data.train's class count\n";
  }
  recipe << to_yaml(*resolved);
  run.write_text("recipe.yaml", recipe.str());
  // Line i names output i, for reading predictions of the exported weights.
  const std::vector<std::string> names = class_names_of(*e.components.train);
  if (!names.empty()) {
    std::string lines;
    for (const auto& name : names) lines += name + "\n";
    run.write_text("classes.txt", lines);
  }
}

// runs/<name>/elastic-<run id>: the link from a torchelastic job to its run directory.
fs::path elastic_link(const Experiment& e) {
  return e.facts.output / e.facts.name / ("elastic-" + e.parallel->environment().run_id);
}

constexpr const char* kRunDirectoryKey = "run_directory";

// The run directory an earlier attempt of this torchelastic job made (empty: none). The
// elastic agent's store lives as long as the job, so a key there belongs to this job alone;
// the link, shared by every job with the same --rdzv-id (torchrun's default is `none`),
// is read only when there is no agent store.
fs::path earlier_attempts_run_directory(const Experiment& e) {
  if (e.parallel->has_job_store()) return e.parallel->job_value(kRunDirectoryKey).value_or("");
  std::error_code ec;
  fs::path run_path = fs::read_symlink(elastic_link(e), ec);
  if (ec) return {};
  if (run_path.is_relative()) run_path = elastic_link(e).parent_path() / run_path;
  return fs::is_directory(run_path) ? run_path : fs::path();
}

void record_job_run_directory(const Experiment& e, const fs::path& run_path) {
  e.parallel->set_job_value(kRunDirectoryKey, fs::absolute(run_path).string());
  // For people (and launches without an agent store): runs/<name>/elastic-<run id>.
  const fs::path link = elastic_link(e), temporary = link.string() + ".tmp";
  std::error_code ec;
  fs::remove(temporary, ec);
  fs::create_symlink(run_path.filename(), temporary);
  fs::rename(temporary, link);
}

// The start-up line of trainer.activation_checkpointing: what the blank forward pass of
// build_components saw recompute, so a user sees the trade before the first step.
void note_activation_checkpointing(const Experiment& e, Progress& progress) {
  if (!e.options.activation_checkpointing.enabled()) return;
  const std::vector<std::string> names = checkpointed_submodules(*e.components.model);
  if (names.empty()) {
    warn("trainer.activation_checkpointing: all, but the model routes no block through mixt::call_block: nothing "
         "is recomputed (name its submodules instead)");
    return;
  }
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i == 6 && names.size() > 8) {
      listed += ", ... " + names.back();
      break;
    }
    listed += (i ? ", " : "") + names[i];
  }
  progress.note("activation checkpointing: " + std::to_string(names.size()) +
                (names.size() == 1 ? " submodule" : " submodules") + " recomputed in the backward pass (" + listed +
                ")");
}

}  // namespace

TrainResult run_experiment(Experiment& e, bool terminal, fs::path* run_dir) {
  const bool main_rank = e.main_rank();
  const bool elastic = e.parallel && !e.parallel->environment().run_id.empty();
  const bool restarted = elastic && e.parallel->attempt() > 1;
  std::unique_ptr<RunDirectory> run;
  fs::path run_path;
  Progress progress(terminal, e.options.log_every, /*quiet=*/!main_rank);
  Trainer trainer(e.components, e.facts, e.options, nullptr, progress, e.parallel.get());
  fs::path resume = e.options.resume;
  if (restarted) {
    // Every rank continues the run an earlier attempt started, from its newest checkpoint;
    // when no attempt got as far as making one, this one starts the run.
    run_path = earlier_attempts_run_directory(e);
    if (!run_path.empty() && has_checkpoint(run_path)) resume = run_path;  // its newest (resolve_checkpoint)
  }
  // Resumed before a new run directory exists: a checkpoint that does not fit leaves no
  // empty run behind (which the next `trainer.resume=runs/...` would have to step over).
  if (!resume.empty()) trainer.resume(resume);
  // A finished run resumed with trainer.epochs not raised: the resume warned, and there is
  // nothing to write (an elastic restart after the last epoch still reopens its run).
  if (trainer.finished() && run_path.empty()) return trainer.fit();
  if (main_rank && !run_path.empty()) {
    run = std::make_unique<RunDirectory>(run_path, RunDirectory::Reopen{});
  } else if (main_rank) {
    run = std::make_unique<RunDirectory>(e.facts.output, e.facts.name);
    run_path = run->path();
    write_resolved_recipe(e, *run);
    if (elastic) record_job_run_directory(e, run_path);
  }
  if (run_dir) *run_dir = run_path;

  trainer.write_to(run.get());
  if (run) progress.note("run directory: " + run->path().string());
  if (e.parallel) {
    progress.note("data parallel: " + std::to_string(e.parallel->world_size()) +
                  (e.parallel->world_size() == 1 ? " rank, " : " ranks, ") + e.parallel->backend_name() + " backend, " +
                  e.facts.device.str() +
                  (e.components.optimizer_shards
                       ? std::string(", sharding: ") + distributed::sharding_name(e.options.distributed.sharding) +
                             " (each rank keeps 1/" + std::to_string(e.parallel->world_size()) +
                             " of the optimizer state" +
                             kept_besides(e.options.distributed.sharding, *e.components.precision)
                       : std::string()));
  }
  note_activation_checkpointing(e, progress);
  if (e.components.adapter) progress.note(adapter_note(e));
  TrainResult result = trainer.fit();
  if (e.components.adapter && run) write_run_adapter(e, run_path);
  return result;
}

}  // namespace mixt
