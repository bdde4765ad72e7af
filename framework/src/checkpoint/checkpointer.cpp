#include "checkpoint/checkpointer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "checkpoint/checkpoint.h"
#include "checkpoint/model_state.h"
#include "common/atomic_file.h"
#include "common/optimizer_shards.h"
#include "common/warnings.h"
#include "distributed/optimizer_resharding.h"
#include "mixt/version.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {
constexpr const char* kResumeHint = "resume with the recipe that wrote it (its run directory has recipe.yaml)";

// Checkpoints before callback state was keyed by name: "INDEX_NAME" in "callbacks".
std::string positional_key(std::size_t index, const std::string& name) { return std::to_string(index) + "_" + name; }

// Whether an archive holds anything (a jit module's own `training` flag aside).
bool holds_state(torch::serialize::InputArchive& archive) {
  for (const std::string& key : archive.keys()) {
    if (key != "training") return true;
  }
  return false;
}

// Components that decide the tensors of a checkpoint. Datasets do not (another data root
// is a fine-tune), nor do callbacks (they observe).
bool shapes_checkpoint(const std::string& kind) { return kind != "dataset" && kind != "callback"; }

// The components must be the ones that wrote it: other names mean other tensors. Both
// ways: a component the checkpoint's run had and this recipe drops (a scheduler removed
// would leave the learning rate where the schedule had it) is as wrong as a new one.
void check_same_components(const nlohmann::json& saved, const std::vector<ComponentRecord>& records,
                           const fs::path& file) {
  for (const auto& r : records) {
    if (!shapes_checkpoint(r.kind)) continue;
    bool found = false;
    std::string written_with;  // the checkpoint's component of this kind, to name it
    for (const auto& s : saved) {
      if (s.value("kind", "") != r.kind) continue;
      if (s.value("name", "") == r.name) found = true;
      written_with = s.value("name", "");
    }
    if (!found) {
      throw Error(ErrorKind::recipe,
                  "checkpoint was written by a run with " +
                      (written_with.empty() ? "no " + r.kind : r.kind + " '" + written_with + "'") +
                      ", this recipe has " + r.kind + " '" + r.name + "'",
                  SourceLocation{file.string()}, "trainer.resume", kResumeHint);
    }
  }
  for (const auto& s : saved) {
    const std::string kind = s.value("kind", "");
    if (!shapes_checkpoint(kind)) continue;
    const bool kept = std::any_of(records.begin(), records.end(), [&](const auto& r) { return r.kind == kind; });
    if (!kept && !records.empty()) {
      throw Error(ErrorKind::recipe,
                  "checkpoint was written by a run with " + kind + " '" + s.value("name", "") +
                      "', this recipe has no " + kind,
                  SourceLocation{file.string()}, "trainer.resume", kResumeHint);
    }
  }
}
}  // namespace

std::string epoch_checkpoint_name(std::int64_t epochs_done) {
  char name[32];
  std::snprintf(name, sizeof(name), "epoch-%04lld", static_cast<long long>(epochs_done));
  return name;
}

Checkpointer::Checkpointer(Components& components, const RunFacts& facts, const TrainerOptions& options,
                           TrainState& state, const Coordinator& coordinator)
    : components_(components), facts_(facts), options_(options), state_(state), coordinator_(coordinator) {}

void Checkpointer::save(const fs::path& file, const std::vector<std::int64_t>& data_positions) const {
  if (settle_before_saving_) settle_before_saving_();
  Saved saved{file, data_positions, state_, {}, {}};
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved.rng = generator.get_state();
  }
  torch::serialize::OutputArchive callbacks = callback_archive(saved.callback_bytes);
  last_saved_.reset();
  write(saved, callbacks);
  last_saved_ = std::move(saved);
}

bool Checkpointer::update_callback_state(const fs::path& file) const {
  if (!last_saved_ || last_saved_->file != file || components_.callbacks.empty()) return false;
  std::string bytes;
  torch::serialize::OutputArchive callbacks = callback_archive(bytes);
  if (bytes == last_saved_->callback_bytes) return false;
  write(*last_saved_, callbacks);
  last_saved_->callback_bytes = std::move(bytes);
  return true;
}

torch::serialize::OutputArchive Checkpointer::callback_archive(std::string& bytes) const {
  torch::serialize::OutputArchive archive;
  for (const NamedCallback& callback : components_.callbacks) {
    torch::serialize::OutputArchive one;
    callback.guarded("save", [&] { callback.callback->save(one); });
    archive.write(callback.key(), one);
  }
  bytes.clear();
  archive.save_to([&](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return archive;
}

void Checkpointer::write(const Saved& saved, torch::serialize::OutputArchive& callbacks) const {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, optimizer_archive, precision_archive, trainer_archive;
  save_model_state(*components_.model, components_.adapter != nullptr, model_archive);
  components_.optimizer->save(optimizer_archive);
  components_.precision->save(precision_archive);
  if (components_.optimizer_shards) components_.optimizer_shards->save_masters(precision_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("precision", precision_archive);
  if (components_.scheduler) {
    torch::serialize::OutputArchive scheduler_archive;
    components_.scheduler->save(scheduler_archive);
    archive.write("scheduler", scheduler_archive);
  }
  if (!components_.callbacks.empty()) archive.write("callback_state", callbacks);
  const TrainState& state = saved.state;
  trainer_archive.write("epoch", c10::IValue(state.epoch));
  trainer_archive.write("batches_in_epoch", c10::IValue(state.batches_in_epoch));
  if (!saved.data_positions.empty()) trainer_archive.write("data_positions", c10::IValue(saved.data_positions));
  trainer_archive.write("global_step", c10::IValue(state.global_step));
  trainer_archive.write("skipped_steps", c10::IValue(state.skipped_steps));
  trainer_archive.write("cpu_rng_state", saved.rng);
  trainer_archive.write("data_order", c10::IValue(data_order()));
  archive.write("trainer", trainer_archive);

  nlohmann::json header = {{"mixt", version()},
                           {"torch", TORCH_VERSION},
                           {"epoch", state.epoch},
                           {"batches_in_epoch", state.batches_in_epoch},
                           {"global_step", state.global_step},
                           {"skipped_steps", state.skipped_steps},
                           {"components", nlohmann::json::array()}};
  if (!saved.data_positions.empty()) header["data_positions"] = saved.data_positions;
  for (const auto& r : facts_.records) {
    header["components"].push_back({{"kind", r.kind}, {"name", r.name}, {"plugin", r.plugin},
                                    {"plugin_version", r.plugin_version}});
  }
  write_checkpoint(saved.file, header, archive);
}

// By key (name, or name:label), so the order of `callbacks:` does not matter; checkpoints of
// mixt before that are read by position. A callback the checkpoint's run did not have
// starts as constructed, and state no callback takes is left: one warning says which.
void Checkpointer::load_callback_state(torch::serialize::InputArchive& archive, const fs::path& file) {
  torch::serialize::InputArchive by_key, by_position;
  const bool keyed = archive.try_read("callback_state", by_key);
  const bool positional = !keyed && archive.try_read("callbacks", by_position);
  std::vector<std::string> fresh, unused;
  std::vector<std::string> taken;
  for (std::size_t i = 0; i < components_.callbacks.size(); ++i) {
    const NamedCallback& callback = components_.callbacks[i];
    const std::string key = keyed ? callback.key() : positional_key(i, callback.name);
    torch::serialize::InputArchive one;
    if (!(keyed ? by_key : by_position).try_read(key, one)) {
      fresh.push_back(callback.key());
      continue;
    }
    taken.push_back(key);
    callback.guarded("load", [&] { callback.callback->load(one); });
  }
  if (keyed || positional) {
    torch::serialize::InputArchive& saved = keyed ? by_key : by_position;
    for (const std::string& key : saved.keys()) {
      torch::serialize::InputArchive one;
      if (std::find(taken.begin(), taken.end(), key) != taken.end() || !saved.try_read(key, one)) continue;
      if (holds_state(one)) unused.push_back(keyed ? key : key.substr(key.find('_') + 1));
    }
  }
  if (fresh.empty() && unused.empty()) return;
  const auto quoted = [](const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "'" : ", '") + name + "'";
    return text;
  };
  std::string line = file.string() + ": ";
  if (!unused.empty()) {
    line += "state of callback" + std::string(unused.size() > 1 ? "s " : " ") + quoted(unused) +
            ", which this recipe does not have, is left unused";
  }
  if (!fresh.empty()) {
    line += std::string(unused.empty() ? "" : "; ") + "no state for callback" + (fresh.size() > 1 ? "s " : " ") +
            quoted(fresh) + " (" + (fresh.size() > 1 ? "they start" : "it starts") + " as new)";
  }
  warn(line);
}

std::string Checkpointer::data_order() const {
  std::string dataset;
  for (const auto& r : facts_.records) {
    if (r.kind == "dataset") {
      dataset = "'" + r.name + "' of ";  // data.train's is recorded first
      break;
    }
  }
  const int ranks = coordinator_.world_size();
  return dataset + std::to_string(components_.train->size()) + " samples in " +
         std::to_string(components_.train->batches_per_epoch()) + " batches per rank, " + std::to_string(ranks) +
         (ranks == 1 ? " rank" : " ranks") + ", seed " + std::to_string(options_.seed) + ", accumulate " +
         std::to_string(options_.accumulate) + (facts_.data_order.empty() ? "" : ", " + facts_.data_order);
}

fs::path Checkpointer::save_epoch_end(const RunDirectory& run) const {
  const std::int64_t done = state_.epoch + 1;
  const std::string name = epoch_checkpoint_name(done);
  const fs::path directory = run.checkpoints();
  // The checkpoint must say "start at the next epoch"; the loop advances state_.epoch after.
  ++state_.epoch;
  try {
    save(directory / name);
  } catch (...) {
    --state_.epoch;
    throw;
  }
  --state_.epoch;
  // `last` is a symlink replaced atomically (a new link renamed over the old one).
  const fs::path link = directory / "last";
  const fs::path temporary = directory / "last.tmp";
  std::error_code ec;
  fs::remove(temporary, ec);
  ec.clear();
  fs::create_symlink(name, temporary, ec);
  if (!ec) fs::rename(temporary, link, ec);
  if (ec) {
    const int error = ec.value();
    fs::remove(temporary, ec);
    throw runtime_error("cannot point " + link.string() + " at " + name + ": " + std::strerror(error) + "; " + name +
                            " itself is complete, and resuming the run directory takes it",
                        storage_hint(error, directory));
  }
  std::vector<fs::path> removed{directory / "interrupted"};
  if (done > options_.keep_checkpoints)
    removed.push_back(directory / epoch_checkpoint_name(done - options_.keep_checkpoints));
  for (const fs::path& file : removed) {
    fs::remove(file, ec);
    for (int rank = 0; components_.optimizer_shards && rank < coordinator_.world_size(); ++rank) {
      fs::remove(optimizer_shard_file(file, rank, coordinator_.world_size()), ec);
    }
  }
  return directory / name;
}

namespace {

// A sharded run's optimizer state, every rank's shard file read in turn, into an optimizer
// that is whole (one process, or ranks without sharding). `names`: its parameters', in its order.
void load_sharded_state_whole(Optimizer& optimizer, const std::vector<std::string>& names, const std::string& manifest,
                              const fs::path& file) {
  distributed::ShardManifest saved;
  try {
    saved = distributed::parse_shard_manifest(manifest);
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorKind::recipe, std::string("the checkpoint is damaged: ") + e.what(), SourceLocation{file.string()},
                "trainer.resume");
  }
  const std::vector<at::Tensor> parameters = optimizer.parameters();
  if (names.size() != parameters.size()) {
    throw Error(ErrorKind::recipe,
                "the checkpoint's optimizer state is sharded over " + std::to_string(saved.world_size) +
                    " ranks, and this optimizer's parameters() are not the tensors it was given: it cannot be "
                    "resharded onto them",
                SourceLocation{file.string()}, "trainer.resume",
                "resume under torchrun with the trainer.distributed.sharding and the rank count that wrote it");
  }
  std::vector<distributed::OptimizedTensor> order;
  for (std::size_t i = 0; i < names.size(); ++i) {
    order.push_back({names[i], parameters[i].sizes().vec(), parameters[i].scalar_type()});
  }
  const std::string difference = distributed::first_tensor_difference(saved, order);
  if (!difference.empty()) {
    throw Error(ErrorKind::recipe, "the checkpoint's optimizer state does not fit this run: " + difference,
                SourceLocation{file.string()}, "trainer.resume", kResumeHint);
  }
  torch::serialize::InputArchive whole =
      distributed::reshard_saved_state(file, saved.world_size, std::move(order), /*rank=*/0, /*to_world=*/1);
  optimizer.load(whole);
}

// The model's, the optimizer's, the precision policy's and the scheduler's states.
// `shards_unseen`: `mixt check` of a sharded recipe outside torchrun, which leaves the ranks'
// shard files for the ranks to read when the run starts. `optimizer_names`: RunFacts'.
void load_component_states(Components& components, torch::serialize::InputArchive& checkpoint, const fs::path& file,
                           bool shards_unseen, const std::vector<std::string>& optimizer_names) {
  torch::serialize::InputArchive model_archive, optimizer_archive, precision_archive;
  checkpoint.read("model", model_archive);
  // Module::load would give a parameter the saved tensor whatever its shape (set_): a
  // model changed since (other channels, other classes) would silently become the saved one.
  const NamedTensors saved = flatten_archive(model_archive);
  const bool frozen_base_omitted = omits_frozen_base(model_archive);
  const LoadReport fit = checkpoint_fit(*components.model, saved, frozen_base_omitted);
  if (!fit.complete()) {
    throw Error(ErrorKind::recipe, "checkpoint does not fit this recipe's model" + fit.describe(),
                SourceLocation{file.string()}, "trainer.resume",
                "resume with the recipe that wrote it (its run directory has recipe.yaml); to start another model "
                "from these weights, mixt export them and name the file in model.weights (strict: false loads "
                "what matches)");
  }
  if (frozen_base_omitted) {
    load_state_dict(*components.model, saved, /*strict=*/false, file.string());
  } else {
    components.model->load(model_archive);
  }
  checkpoint.read("optimizer", optimizer_archive);
  c10::IValue shards;
  if (components.optimizer_shards) {
    // Its own shards, or another world size's (or a whole state) resharded.
    components.optimizer->load(optimizer_archive);
    components.optimizer_shards->load_shard(file);
  } else if (!optimizer_archive.try_read(kShardedOptimizerKey, shards)) {
    components.optimizer->load(optimizer_archive);
  } else if (!shards_unseen) {
    load_sharded_state_whole(*components.optimizer, optimizer_names, shards.toStringRef(), file);
  }
  checkpoint.read("precision", precision_archive);
  try {
    components.precision->load(precision_archive);
    if (components.optimizer_shards) components.optimizer_shards->load_masters(precision_archive);
  } catch (const Error& e) {  // e.g. a disabled GradScaler's (empty) state, resumed enabled
    throw Error(ErrorKind::recipe, "the checkpoint's precision state does not fit this recipe: " + e.message(),
                SourceLocation{file.string()}, "trainer.resume",
                "resume with the precision options of the recipe that wrote it (its run directory has "
                "recipe.yaml)");
  }
  if (components.scheduler) {
    torch::serialize::InputArchive scheduler_archive;
    if (checkpoint.try_read("scheduler", scheduler_archive)) components.scheduler->load(scheduler_archive);
  }
}

// The trainer's counters into `state`, each rank's data position when saved mid-epoch, and
// the CPU generator's state, which it restores; returns the saved data order.
std::string read_trainer_state(torch::serialize::InputArchive& checkpoint, TrainState& state,
                               std::vector<std::int64_t>& data_positions) {
  torch::serialize::InputArchive trainer_archive;
  checkpoint.read("trainer", trainer_archive);
  std::string saved_data_order;
  c10::IValue value;
  trainer_archive.read("epoch", value);
  state.epoch = value.toInt();
  trainer_archive.read("batches_in_epoch", value);
  state.batches_in_epoch = value.toInt();
  trainer_archive.read("global_step", value);
  state.global_step = value.toInt();
  if (trainer_archive.try_read("skipped_steps", value)) state.skipped_steps = value.toInt();
  if (trainer_archive.try_read("data_positions", value)) data_positions = value.toIntVector();
  if (trainer_archive.try_read("data_order", value)) saved_data_order = value.toStringRef();
  at::Tensor rng;
  trainer_archive.read("cpu_rng_state", rng);
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(rng);
  return saved_data_order;
}

// A checkpoint from further into an epoch than this data has batches (other data, another
// batch size) would silently train on nothing, or fail deep in the loader.
void check_position_fits(const TrainState& state, const std::vector<std::int64_t>& data_positions, std::int64_t batches,
                         const fs::path& file) {
  std::int64_t furthest = state.batches_in_epoch;
  for (const std::int64_t position : data_positions) furthest = std::max(furthest, position);
  if (furthest > batches) {
    throw Error(ErrorKind::recipe,
                "checkpoint stopped after batch " + std::to_string(furthest) + " of epoch " +
                    std::to_string(state.epoch + 1) + ", but the training data has " + std::to_string(batches) +
                    " batches per epoch",
                SourceLocation{file.string()}, "trainer.resume",
                "resume with the data and batch size the run was started with (its run directory has recipe.yaml)");
  }
}

// Mid-epoch, the position counts batches of the order the run had: with another batch
// size, seed, accumulation, world size or dataset the same count is other samples, and
// the rest of the epoch would skip some and train others twice, silently.
void check_same_data_order(const Checkpointer& checkpointer, const TrainState& state,
                           const std::string& saved_data_order, const fs::path& file) {
  if (state.batches_in_epoch > 0 && !saved_data_order.empty() && saved_data_order != checkpointer.data_order()) {
    throw Error(ErrorKind::recipe,
                "checkpoint stopped in the middle of epoch " + std::to_string(state.epoch + 1) + " (after batch " +
                    std::to_string(state.batches_in_epoch) + ") with data.train " + saved_data_order +
                    "; this run has " + checkpointer.data_order() +
                    ": the rest of the epoch would not be the samples it left",
                SourceLocation{file.string()}, "trainer.resume",
                "resume mid-epoch with the data.train, trainer.seed, trainer.accumulate and number of ranks the run "
                "was interrupted with (its run directory has recipe.yaml), or resume from the epoch's start: the "
                "checkpoint before it (checkpoints/epoch-NNNN, or none: start again)");
  }
}

}  // namespace

Checkpointer::Resumed Checkpointer::resume(const fs::path& path, bool check_data_order) {
  const fs::path file = resolve_checkpoint(path);
  CheckpointContents contents = read_checkpoint(file, facts_.device);
  check_same_components(contents.header.value("components", nlohmann::json::array()), facts_.records, file);
  Resumed resumed{file, {}};
  TrainState state = state_;
  try {
    // Where the checkpoint stood first: a position this run cannot take up is refused
    // before any state is loaded (or resharded, which reads every rank's file).
    const std::string saved_data_order = read_trainer_state(contents.archive, state, resumed.data_positions);
    check_position_fits(state, resumed.data_positions, components_.train->batches_per_epoch(), file);
    if (check_data_order) check_same_data_order(*this, state, saved_data_order, file);
    const bool shards_unseen = !check_data_order && options_.distributed.sharding != distributed::Sharding::none;
    load_component_states(components_, contents.archive, file, shards_unseen, facts_.optimizer_names);
    load_callback_state(contents.archive, file);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::recipe, std::string("checkpoint does not fit this recipe: ") + e.what_without_backtrace(),
                SourceLocation{file.string()}, "trainer.resume");
  }
  state_ = state;
  return resumed;
}

}  // namespace mixt
