#include "assembly/components.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "assembly/adapters.h"
#include "assembly/model_input.h"
#include "assembly/quantize_base.h"
#include "assembly/routing_probe.h"
#include "assembly/speed_notes.h"
#include "assembly/transformers_dir.h"
#include "common/closest_match.h"
#include "common/first_line.h"
#include "common/warnings.h"
#include "distributed/optimizer_resharding.h"
#include "distributed/sharded_optimizer.h"
#include "distributed/sharded_weights.h"
#include "distributed/sync_batchnorm.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/fp32_modules.h"
#include "mixt/helpers/master_weights.h"
#include "mixt/helpers/nf4.h"
#include "mixt/helpers/state_dict.h"
#include "mixt/options.h"
#include "mixt/packed_sequences.h"
#include "mixt/weight_shards.h"
#include "recipe/recipe_loader.h"

namespace mixt {

namespace {
const Optional<std::string> kWeights{"weights",
                                     "safetensors file to load (the names of the model's reference: torchvision's, "
                                     "transformers'); read by mixt for every model"};
const Option<bool> kStrict{"strict", true, "with weights: every name and shape must match (false: load what matches)"};
const Optional<std::string> kFrom{
    "from",
    "a transformers checkpoint directory (save_pretrained's): its config.json fills the options the recipe leaves "
    "out, its safetensors are the weights, its tokenizer the tokenizer; read by mixt"};
const Optional<std::string> kTokenizer{
    "tokenizer", "a tokenizer.json or SentencePiece tokenizer.model: text in and out of mixt generate; read by mixt"};
const Option<bool> kEnabled{"enabled", true,
                            "false: not built (turns off a callback that is on by default); read by mixt"};
const Optional<std::string> kLabel{
    "label",
    "when the recipe lists this callback more than once: the name of this entry's state in checkpoints "
    "(default: its number among them, 1, 2, ...); read by mixt"};
const Option<std::vector<std::string>> kFp32Modules{
    "fp32_modules", {}, "submodules kept in float32 under autocast; read by mixt for every policy"};

// The names of the model's submodules, for checking the names a recipe lists.
std::vector<std::string> submodule_names(const Model& model) {
  std::vector<std::string> known;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) known.push_back(item.key());
  return known;
}

// precision.fp32_modules: read here, for every policy, and checked against the model. The
// hint offers only the names the model routes: any other submodule would fail at step 1.
void apply_fp32_modules(const Config& precision_section, const Components& components, const RunFacts& facts) {
  const std::vector<std::string> names = kFp32Modules.read(precision_section);
  const std::vector<std::string> known = submodule_names(*components.model);
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    precision_section.fail("fp32_modules", "the model has no submodule named '" + name + "'",
                           routed_names_hint(name, probe_routing(components, facts).routed));
  }
  set_fp32_modules(*components.model, names);
}

// trainer.activation_checkpointing: names checked against the model, as fp32_modules are.
void apply_activation_checkpointing(const Config& trainer_section, const ActivationCheckpointing& choice,
                                    const Components& components, const RunFacts& facts) {
  const std::vector<std::string> known = submodule_names(*components.model);
  for (const std::string& name : choice.names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    trainer_section.fail("activation_checkpointing", "the model has no submodule named '" + name + "'",
                         routed_names_hint(name, probe_routing(components, facts).routed));
  }
  set_activation_checkpointing(*components.model, choice);
}

// An explicit model.num_classes that is not the training data's would fail only at the
// first step ("Target 1 is out of bounds"), after the run directory exists, or train
// outputs no label ever names. One forward pass on a blank batch finds it before anything
// is written, for `mixt run` and `mixt check` alike.
void check_model_fits_train_data(const Components& components, const RunFacts& facts, const Config& model_section,
                                 const std::string& task_name) {
  const std::int64_t classes = components.train->num_classes();
  const std::vector<std::int64_t> sample_shape = components.train->sample_shape();
  if (sample_shape.empty()) return;  // a dataset that cannot say (samples of varying shape): nothing to try
  at::Tensor out;
  try {
    out = forward_blank_batch(components, facts, sample_shape);
  } catch (const c10::Error& e) {
    model_section.fail("name",
                       "the model cannot take the training samples " + c10::str(at::IntArrayRef(sample_shape)) + ": " +
                           first_line(e.what_without_backtrace()),
                       "match the model's options to data.train's samples (its transforms: crop size, channels), "
                       "or the task to the model: the recipe's task (" +
                           task_name +
                           ") fed it that blank batch "
                           "(`mixt list task`; a language model trains under task: {name: causal_lm})");
  }
  // A wrong first dimension (a plugin model that reshapes carelessly) would fail only at
  // the first step, in the loss, as a "batch_size" mismatch that names no model.
  const std::int64_t batch = 2;  // forward_blank_batch's
  std::vector<std::int64_t> input_shape = sample_shape;
  input_shape.insert(input_shape.begin(), batch);
  const std::string problem = components.task->output_problem(out.sizes(), input_shape, classes);
  if (!problem.empty()) {
    const bool explicit_classes = model_section.has("num_classes");
    model_section.fail(explicit_classes ? "num_classes" : "name",
                       "the model's output for a batch of " + std::to_string(batch) + " samples " + problem,
                       explicit_classes ? "drop model.num_classes (the zoo's models then take the data's class count) "
                                          "or set it to " +
                                              std::to_string(classes)
                                        : "the recipe's task (" + task_name +
                                              ") decides the output a model must "
                                              "give (mixt/task.h); `mixt describe task " +
                                              task_name + "` says which");
  }
}

// Packed rows (mixt/packed_sequences.h: several samples one after another) need a model that
// keeps attention inside each sample: a recipe error at the dataset, before anything is written.
void check_model_takes_packed_rows(const Components& components, const Config& data) {
  const std::pair<const char*, const Dataset*> splits[] = {{"train", components.train.get()},
                                                           {"val", components.val.get()}};
  for (const auto& [split, dataset] : splits) {
    const auto* packs = dynamic_cast<const PacksRows*>(dataset);
    if (packs != nullptr && packs->packs_rows() &&
        dynamic_cast<const PackedModel*>(components.model.get()) == nullptr) {
      data.section(split).fail("name",
                               std::string("data.") + split +
                                   "'s rows are packed (several samples one after another), and the model cannot "
                                   "keep attention inside each: it does not derive from mixt::PackedModel",
                               "use a model that does (llama), or set the dataset's packing: false");
    }
  }
}

// Why data.val's class names are not data.train's ("" when they are, or a side has none):
// the first label they disagree on, and the names only one side has (a few of each).
std::string class_mismatch(const std::vector<std::string>& train, const std::vector<std::string>& val) {
  if (train.empty() || val.empty() || train == val) return "";
  std::size_t label = 0;
  while (label < train.size() && label < val.size() && train[label] == val[label]) ++label;
  std::string message = "data.val's classes are not data.train's: ";
  if (label < train.size() && label < val.size()) {
    message += "label " + std::to_string(label) + " is '" + val[label] + "' in data.val but '" + train[label] +
               "' in data.train";
  } else {
    message += "data.val has " + std::to_string(val.size()) + " classes, data.train " + std::to_string(train.size());
  }
  const auto only_in = [](const std::vector<std::string>& side, const std::vector<std::string>& other) {
    std::vector<std::string> missing;
    for (const auto& name : side) {
      if (std::find(other.begin(), other.end(), name) == other.end()) missing.push_back(name);
    }
    std::string listed;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) listed += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) listed += ", ... (" + std::to_string(missing.size()) + " in all)";
    return listed;
  };
  const std::string val_only = only_in(val, train), train_only = only_in(train, val);
  if (!val_only.empty()) message += "; only in data.val: " + val_only;
  if (!train_only.empty()) message += "; only in data.train: " + train_only;
  return message;
}

// The model is built for the training samples; a validation set it cannot take would fail
// only after the first epoch's training. Labels beyond the model's outputs, or samples of
// another shape that the model does not accept (one forward pass on a blank batch: a CNN
// with global pooling takes larger eval crops, a fixed-size head does not), are recipe
// errors at data.val.
void check_val_fits_model(const Components& components, const RunFacts& facts, const Config& data) {
  if (!components.val) return;
  const Config val = data.section("val");
  // Labels are indices: a validation set with other (or fewer) class names would score
  // every prediction against the wrong class, with no error anywhere.
  const std::string mismatch = class_mismatch(class_names_of(*components.train), class_names_of(*components.val));
  if (!mismatch.empty()) {
    val.fail("name", mismatch,
             "give data.val the classes of data.train, named alike (class folders: the same folder names), so "
             "that label i means the same class in both");
  }
  if (components.val->num_classes() > components.train->num_classes()) {
    val.fail("name",
             "the validation data has " + std::to_string(components.val->num_classes()) +
                 " classes, the training data " + std::to_string(components.train->num_classes()) +
                 " (the model's outputs)",
             "use the same classes for data.train and data.val");
  }
  const std::vector<std::int64_t> shape = components.val->sample_shape();
  if (shape.empty() || shape == components.train->sample_shape()) return;  // empty: the dataset cannot say
  try {
    forward_blank_batch(components, facts, shape);
  } catch (const c10::Error& e) {
    val.fail("name",
             "the model, built for the training samples " +
                 c10::str(at::IntArrayRef(components.train->sample_shape())) + ", cannot take the validation samples " +
                 c10::str(at::IntArrayRef(shape)) + ": " + first_line(e.what_without_backtrace()),
             "give data.val the training data's sample shape (its transforms: crop size, channels)");
  }
}

void record(RunFacts& facts, const Registry& registry, ComponentKind kind, const Config& section) {
  const ComponentEntry& entry = registry.find(kind, section);
  facts.records.push_back({kind_name(kind), entry.name, entry.origin.name, entry.origin.version, entry.origin.file});
}

// The recipe's callbacks, then those on by default that it does not name.
// Each callback's state is kept in checkpoints under its name, so reordering `callbacks:`
// keeps every callback's own; one listed twice adds its label (or its number) to tell them apart.
void build_callbacks(Components& components, RunFacts& facts, const Config& recipe, const Registry& registry,
                     const CallbackContext& context) {
  std::set<std::string> named;
  std::map<std::string, int> listed, seen;
  const std::vector<Config> sections = recipe.sections("callbacks");
  for (const Config& section : sections) ++listed[registry.find(ComponentKind::callback, section).name];
  for (const Config& section : sections) {
    const ComponentEntry& entry = registry.find(ComponentKind::callback, section);
    named.insert(entry.name);
    const int number = ++seen[entry.name];
    const std::optional<std::string> label = kLabel.read(section);
    if (!kEnabled.read(section)) continue;
    std::string key;
    if (listed[entry.name] > 1) key = entry.name + ":" + (label ? *label : std::to_string(number));
    for (const NamedCallback& other : components.callbacks) {
      if (!key.empty() && other.key() == key) {
        section.fail("label", "two entries of callback '" + entry.name + "' keep their state as '" + key + "'",
                     "give each entry of it a label of its own");
      }
    }
    components.callbacks.push_back(
        {registry.make_callback(section, context), entry.name, entry.origin.name, entry.origin.file, key});
    record(facts, registry, ComponentKind::callback, section);
  }
  for (const ComponentEntry* entry : registry.list(ComponentKind::callback)) {
    if (!entry->info.enabled_by_default || named.count(entry->name)) continue;
    const Config defaults(parse_yaml("{name: " + entry->name + "}", "(on by default)"), "callbacks");
    components.callbacks.push_back(
        {registry.make_callback(defaults, context), entry->name, entry->origin.name, entry->origin.file});
    record(facts, registry, ComponentKind::callback, defaults);
  }
}
}  // namespace

// A recipe without `task:` takes the task model.from's config.json implies (a causal language
// model's), else trains a classifier, as every recipe did before tasks existed.
Config task_section_of(const Config& recipe) {
  if (recipe.has("task")) return recipe.section("task");
  if (recipe.has("model") && recipe.section("model").has("from")) {
    const std::string implied = transformers_dir_task(recipe.section("model").string("from"));
    if (!implied.empty()) return Config(parse_yaml("{name: " + implied + "}", "(model.from's architectures)"), "task");
  }
  return Config(parse_yaml("{name: classification}", "(the default task)"), "task");
}

namespace {
[[noreturn]] void fail_unrouted(const Components& components, const RunFacts& facts,
                                const std::vector<std::string>& unrouted, const std::string& what,
                                const SourceLocation& where, const std::string& key) {
  std::string names;
  for (const auto& name : unrouted) names += (names.empty() ? "'" : ", '") + name + "'";
  throw Error(ErrorKind::recipe, "the model never ran " + names + " through mixt::call_submodule, so it cannot " + what,
              where, key,
              routed_names_hint(unrouted.front(), probe_routing(components, facts).routed) + "; or remove the option");
}
}  // namespace

void check_listed_submodules_routed(const Components& components, const RunFacts& facts) {
  if (const auto unrouted = unrouted_fp32_modules(*components.model); !unrouted.empty()) {
    fail_unrouted(components, facts, unrouted, "keep it in fp32", facts.where_listed.fp32_modules,
                  "precision.fp32_modules");
  }
  if (const auto unrouted = unrouted_checkpointed_submodules(*components.model); !unrouted.empty()) {
    fail_unrouted(components, facts, unrouted, "recompute it in the backward pass",
                  facts.where_listed.activation_checkpointing, "trainer.activation_checkpointing");
  }
}

std::vector<OptionDoc> framework_option_docs(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::model:
      return {kWeights, kStrict, kTokenizer, kFrom};
    case ComponentKind::precision:
      return {kFp32Modules};
    case ComponentKind::callback:
      return {kEnabled, kLabel};
    case ComponentKind::adapter:
      return {adapter_from_doc(), adapter_quantize_base_doc()};
    default:
      return {};
  }
}

std::shared_ptr<Model> build_model(const Config& section, const Registry& registry, const ModelContext& context) {
  // model.from first: its config.json fills options the model reads.
  std::optional<WeightFiles> from_weights;
  if (kFrom.read(section)) from_weights = apply_transformers_dir(section, registry.find(ComponentKind::model, section));
  std::shared_ptr<Model> model = registry.make_model(section, context);
  // `weights:` and `strict:` belong to every model, so the framework reads them here
  // rather than each plugin.
  const bool strict = kStrict.read(section);
  if (const std::optional<std::string> tokenizer = kTokenizer.read(section)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*tokenizer, ec)) {
      section.fail("tokenizer", "tokenizer file does not exist: " + *tokenizer,
                   "a tokenizer.json or tokenizer.model, relative to the directory mixt runs in");
    }
  }
  if (from_weights) {
    const std::string dir = section.string("from");
    const LoadReport report = from_weights->load_into(*model, strict, dir);
    if (!report.complete()) {
      warn(section.location("from").str() + ": loaded " + std::to_string(report.loaded) + " tensors of " + dir +
           "; the rest keep their initial values:" + report.describe());
    }
  }
  if (const std::optional<std::string> weights = kWeights.read(section)) {
    const std::string& file = *weights;
    const SafetensorsReader reader(file);
    const LoadReport report = load_state_dict(
        *model, reader.layout(), [&](std::size_t i, const at::Tensor& target) { reader.read_into(i, target); }, strict,
        file);
    if (!report.complete()) {
      warn(section.location("weights").str() + ": loaded " + std::to_string(report.loaded) + " tensors of " + file +
           "; the rest keep their initial values:" + report.describe());
    }
  }
  return model;
}

namespace {

// data.train (required) and data.val (optional; `data.val: null` turns evaluation off),
// each giving at least one batch per epoch.
void build_datasets(Components& components, RunFacts& facts, const Config& data, const Registry& registry,
                    const TrainerOptions& options, const Communicator* communicator,
                    const std::string& model_tokenizer) {
  if (!data.has("train")) {
    throw recipe_error("missing section: data.train", data.location("train"), "data",
                       "add `data: {train: {name: <dataset>, ...}}`");
  }
  for (const std::string& split : data.keys()) {
    if (split != "train" && split != "val") {
      data.fail(split, "unknown data split '" + split + "'", "data: takes train and val");
    }
    if (!data.has(split)) continue;
    const Config section = data.section(split);
    give_model_tokenizer(section, registry.find(ComponentKind::dataset, section), model_tokenizer);
    DatasetContext context{split, options.seed, communicator ? communicator->rank() : 0,
                           communicator ? communicator->world_size() : 1, facts.device};
    auto dataset = registry.make_dataset(section, context);
    record(facts, registry, ComponentKind::dataset, section);
    // A run of zero steps (or an evaluation of zero samples, a NaN loss) would end "done".
    if (dataset->batches_per_epoch() == 0) {
      section.fail(section.has("batch_size") ? "batch_size" : "name",
                   "data." + split + " gives no batch per epoch (" + std::to_string(dataset->size()) + " samples" +
                       (context.world_size > 1 ? " on this rank" : "") + ")",
                   dataset->size() == 0 ? "check the section's data location and limit"
                                        : "lower data." + split + ".batch_size to " + std::to_string(dataset->size()) +
                                              " or less, or set drop_last: false");
    }
    (split == "train" ? components.train : components.val) = std::move(dataset);
  }
}

// The model on the device, in the recipe's memory format, its batch norms synchronised
// across ranks when asked.
void build_model_on_device(Components& components, RunFacts& facts, const Config& model_section,
                           const Registry& registry, const TrainerOptions& options, const Config& trainer_section,
                           const Communicator* communicator) {
  ModelContext model_context{facts.device, components.train->sample_shape(), components.train->num_classes()};
  components.model = build_model(model_section, registry, model_context);
  record(facts, registry, ComponentKind::model, model_section);
  components.model->to(facts.device);
  facts.channels_last = options.channels_last;
  if (options.channels_last) {
    // torch::nn::Module::to() takes no memory format in C++: convert each 4-D tensor.
    at::NoGradGuard no_grad;
    for (auto& tensor : components.model->parameters()) {
      if (tensor.dim() == 4) tensor.set_data(tensor.data().contiguous(at::MemoryFormat::ChannelsLast));
    }
    for (auto& tensor : components.model->buffers()) {
      if (tensor.dim() == 4) tensor.set_data(tensor.data().contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  at::globalContext().setBenchmarkCuDNN(options.cudnn_benchmark);
  if (options.distributed.sync_batchnorm) {
    synchronise_batch_norm(*components.model, communicator, trainer_section.section("distributed"), warn);
  }
}

// The precision policy set up on the model, with fp32_modules and activation checkpointing
// applied, and what the policy costs on this device said once.
void build_precision(Components& components, RunFacts& facts, const Config& precision_section, const Registry& registry,
                     const TrainerOptions& options, const Config& trainer_section, const Communicator* communicator) {
  const PrecisionContext precision_context{facts.device, communicator, kFp32Modules.read(precision_section)};
  components.precision = registry.make_precision(precision_section, precision_context);
  record(facts, registry, ComponentKind::precision, precision_section);
  components.precision->setup(*components.model, facts.device);
  apply_fp32_modules(precision_section, components, facts);
  facts.speed_note = speed_note(registry.find(ComponentKind::precision, precision_section).name, *components.precision,
                                *components.model, facts.device);
  if (!facts.speed_note.empty()) warn_once(facts.speed_note);
  facts.where_listed.fp32_modules = precision_section.location("fp32_modules");
  apply_activation_checkpointing(trainer_section, options.activation_checkpointing, components, facts);
  facts.where_listed.activation_checkpointing = trainer_section.location("activation_checkpointing");
}

// The recipe's adapter on the model the precision policy set up (so that it wraps the
// policy's linear functions), the model frozen: the optimizer then takes the adapter's
// parameters alone.
// A master-weight policy makes its masters when the optimizer asks for its parameters,
// after this: the adapter's alone.
void build_adapter(Components& components, RunFacts& facts, const Config& section, const Registry& registry) {
  components.adapter = apply_adapter(section, registry, *components.model, AdapterContext{facts.device});
  record(facts, registry, ComponentKind::adapter, section);
}

// Sharding the parameters cuts every weight into the ranks' chunks; an NF4 base is not cut
// (its codes are no parameter), and data parallel without sharding needs nothing of it.
void refuse_sharded_nf4_base(const Config& adapter, torch::nn::Module& model, const TrainerOptions& options) {
  if (options.distributed.sharding != distributed::Sharding::parameters) return;
  for (const auto& parameter : model.parameters()) {
    if (held_in_nf4(parameter)) {
      adapter.fail("quantize_base", "trainer.distributed.sharding: parameters does not shard a base held in NF4 yet",
                   "sharding: none, optimizer or gradients: each rank holds the 4-bit base whole");
    }
  }
}

// The optimizer over the policy's parameters (over this rank's shards of them when
// trainer.distributed.sharding says so), and the scheduler, which needs the steps per epoch.
// Returns the weights as this rank keeps them, for the callbacks.
std::shared_ptr<const WeightShards> build_optimizer_and_schedule(Components& components, RunFacts& facts,
                                                                 const Config& recipe, const Registry& registry,
                                                                 const TrainerOptions& options,
                                                                 const Communicator* communicator) {
  const Config optimizer_section = recipe.section("optimizer");
  const bool sharded = options.distributed.sharding != distributed::Sharding::none && communicator != nullptr &&
                       communicator->world_size() > 1;
  const bool shards_parameters = sharded && options.distributed.sharding == distributed::Sharding::parameters;
  distributed::ModelBlocks blocks;
  if (sharded) {
    // A master-weight policy's masters become the ranks' float32 shards of the model's
    // weights (as ZeRO counts them with the optimizer state, in every mode).
    if (auto* masters = dynamic_cast<ShardableMasters*>(components.precision.get())) {
      masters->master_weights().keep_on_shards();
      blocks.masters_on_shards = true;
    }
  }
  OptimizerContext optimizer_context;
  optimizer_context.named_parameters = components.precision->optimizer_parameters(*components.model);
  const auto build_optimizer = [&](const OptimizerContext& context) {
    return registry.make_optimizer(optimizer_section, context);
  };
  if (shards_parameters) {
    // ZeRO-3's units are the blocks the model routes (found by one blank forward pass).
    blocks.model = components.model;
    blocks.blocks = probe_routing(components, facts, /*with_blocks=*/true, options.activation_checkpointing).blocks;
  }
  std::shared_ptr<const WeightShards> weights = whole_weights(components.model);
  if (auto sharded = distributed::shard_optimizer(options.distributed, communicator, optimizer_context.named_parameters,
                                                  build_optimizer, blocks)) {
    if (sharded->units()) {
      weights =
          std::make_shared<distributed::ShardedWeights>(components.model, sharded->layout(), sharded->communicator());
    }
    components.optimizer_shards = sharded.get();
    components.optimizer = std::move(sharded);
  } else {
    components.optimizer = build_optimizer(optimizer_context);
    if (auto order =
            distributed::in_optimizer_order(components.optimizer->parameters(), optimizer_context.named_parameters)) {
      for (const auto& tensor : *order) facts.optimizer_names.push_back(tensor.name);
    }
  }
  record(facts, registry, ComponentKind::optimizer, optimizer_section);

  facts.batches_per_epoch = components.train->batches_per_epoch();
  facts.steps_per_epoch = options.steps_per_epoch(facts.batches_per_epoch);
  if (recipe.has("scheduler")) {
    const Config scheduler_section = recipe.section("scheduler");
    SchedulerContext context{components.optimizer.get(), facts.steps_per_epoch, options.epochs};
    components.scheduler = registry.make_scheduler(scheduler_section, context);
    record(facts, registry, ComponentKind::scheduler, scheduler_section);
  }
  return weights;
}

}  // namespace

Components build_components(const Config& recipe, const Registry& registry, const TrainerOptions& options,
                            const Config& trainer_section, RunFacts& facts, const Communicator* communicator) {
  Components components;
  const Config data = recipe.section("data");
  // model.from's tokenizer encodes the text of data sections that name none.
  const Config model = recipe.section("model");
  const std::string from_tokenizer =
      model.has("from") && !model.has("tokenizer") ? transformers_dir_tokenizer(model.string("from")) : "";
  build_datasets(components, facts, data, registry, options, communicator, from_tokenizer);

  // Before the model: the task decides the blank batch that checks it.
  const Config task_section = task_section_of(recipe);
  components.task = registry.make_task(task_section, TaskContext{facts.device, components.train->num_classes()});
  record(facts, registry, ComponentKind::task, task_section);

  const Config model_section = recipe.section("model");
  build_model_on_device(components, facts, model_section, registry, options, trainer_section, communicator);
  build_precision(components, facts, recipe.section("precision"), registry, options, trainer_section, communicator);
  if (recipe.has("adapter")) {
    build_adapter(components, facts, recipe.section("adapter"), registry);
    refuse_sharded_nf4_base(recipe.section("adapter"), *components.model, options);
  }
  check_model_fits_train_data(components, facts, model_section, registry.find(ComponentKind::task, task_section).name);
  check_val_fits_model(components, facts, data);
  check_model_takes_packed_rows(components, data);
  // That blank forward pass also found a listed submodule the model never routes, so `mixt
  // check` says so before any run directory exists.
  if (!components.train->sample_shape().empty()) check_listed_submodules_routed(components, facts);

  std::shared_ptr<const WeightShards> weights =
      build_optimizer_and_schedule(components, facts, recipe, registry, options, communicator);
  const CallbackContext callback_context{facts.device,
                                         components.model,
                                         communicator ? communicator->rank() : 0,
                                         communicator ? communicator->world_size() : 1,
                                         components.task->figures(),
                                         std::move(weights)};
  build_callbacks(components, facts, recipe, registry, callback_context);
  return components;
}

}  // namespace mixt
