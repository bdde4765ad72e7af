#include "distributed/sharded_optimizer.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <optional>

#include "common/atomic_file.h"
#include "common/warnings.h"
#include "distributed/optimizer_resharding.h"
#include "mixt/error.h"
#include "mixt/helpers/named_tensors_archive.h"

namespace mixt::distributed {

namespace {
constexpr const char* kSameRunHint =
    "resume with the model and precision policy of the run that wrote it (its run directory's recipe.yaml); to go "
    "on with another model, mixt export the weights and start from them (model.weights), with a fresh optimizer";
}  // namespace

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<Optimizer> inner, std::unique_ptr<ShardLayout> layout, Sharding mode,
                                   const ProcessGroupCommunicator& communicator, std::unique_ptr<ParameterUnits> units,
                                   bool masters_on_shards)
    : inner_(std::move(inner)),
      layout_(std::move(layout)),
      mode_(mode),
      communicator_(communicator),
      units_(std::move(units)),
      masters_on_shards_(masters_on_shards) {
  layout_->copy_full_into_shards();
  if (reduce_scatters_gradients(mode_)) {
    reduce_scatter_ = std::make_unique<GradientReduceScatter>(*layout_, communicator_);
  }
  if (units_) reduce_scatter_->set_on_bucket_taken([this](std::size_t bucket) { units_->on_bucket_taken(bucket); });
}

void ShardedOptimizer::start_from_full() {
  if (!shards_from_checkpoint_) layout_->copy_full_into_shards();
  shards_from_checkpoint_ = false;
  if (units_) units_->release_all();
}

void ShardedOptimizer::gather_whole_model() {
  if (units_) units_->gather_whole();
  ++whole_depth_;
}

void ShardedOptimizer::release_whole_model() {
  if (units_) units_->release_whole();
  if (--whole_depth_ == 0) whole_masters_.clear();  // the epoch's checkpoint is written
}

void ShardedOptimizer::save_masters(torch::serialize::OutputArchive& precision) const {
  if (!masters_on_shards_) return;
  if (whole_masters_.empty()) throw std::logic_error("the masters are written before the ranks' shards were saved");
  torch::serialize::OutputArchive nested;
  write_named_tensors(nested, whole_masters_);
  precision.write("master_weights", nested);
}

void ShardedOptimizer::load_masters(torch::serialize::InputArchive& precision) {
  if (!masters_on_shards_) return;
  torch::serialize::InputArchive nested;
  if (!precision.try_read("master_weights", nested)) {
    throw Error(ErrorKind::recipe, "the checkpoint holds no master weights: another precision policy wrote it", {},
                "trainer.resume", "resume it with the policy it was written with");
  }
  const NamedTensors saved = read_named_tensors(nested);
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : saved) by_name[name] = &tensor;
  const std::vector<ShardLayout::Entry>& entries = layout_->entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto found = by_name.find(entries[i].name);
    if (found == by_name.end() || found->second->sizes() != entries[i].full.sizes()) {
      throw Error(ErrorKind::recipe,
                  "the checkpoint's master weights do not match the model's parameter " + entries[i].name, {},
                  "trainer.resume", kSameRunHint);
    }
    layout_->cut_into_shard(i, *found->second);
  }
  shards_from_checkpoint_ = true;
}

void ShardedOptimizer::gather_after_step() {
  if (units_) {
    units_->after_step();
  } else {
    layout_->all_gather_into_full(communicator_);
  }
}

void ShardedOptimizer::prepare_backward(bool last) {
  if (units_) units_->prepare_backward();
  if (reduce_scatter_) reduce_scatter_->prepare_backward(last);
}

void ShardedOptimizer::step() {
  inner_->step();
  gather_after_step();
}

void ShardedOptimizer::step_scaled(const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  // A skipped step leaves the shards as they were: the gather then writes the same values.
  inner_->step_scaled(grad_scale, found_inf);
  gather_after_step();
}

void ShardedOptimizer::zero_grad() {
  inner_->zero_grad();
  layout_->drop_full_gradients();
}

void ShardedOptimizer::take_gradients() {
  if (reduce_scatter_) {
    reduce_scatter_->finish();
  } else {
    layout_->slice_gradients();
  }
}

at::Tensor ShardedOptimizer::norm_over_ranks(const at::Tensor& local_norm) const {
  // Every rank takes part, with or without gradients of its own.
  at::Tensor squares =
      local_norm.defined()
          ? local_norm.to(at::kFloat).square().reshape({1})
          : at::zeros({1}, at::TensorOptions()
                               .dtype(at::kFloat)
                               .device(parameters().empty() ? at::Device(at::kCPU) : parameters().front().device()));
  communicator_.all_reduce(squares, ReduceOp::sum);
  return squares.sqrt().reshape({});
}

std::string ShardedOptimizer::manifest() const {
  return std::string("sharding ") + sharding_name(mode_) + "\n" + layout_->describe();
}

void ShardedOptimizer::save(torch::serialize::OutputArchive& archive) {
  archive.write(kShardedOptimizerKey, c10::IValue(manifest()));
}

std::vector<OptimizedTensor> ShardedOptimizer::optimizer_order() const {
  std::optional<std::vector<OptimizedTensor>> found = in_optimizer_order(inner_->parameters(), layout_->named_shards());
  if (!found) {
    throw Error(ErrorKind::recipe,
                "the optimizer's parameters() are not the shards it was built over: its checkpointed state cannot be "
                "resharded",
                {}, "trainer.resume", "resume on as many ranks, with the same sharding, as the run that wrote it");
  }
  std::vector<OptimizedTensor> order = std::move(*found);
  std::map<std::string, const at::Tensor*> full;
  for (const ShardLayout::Entry& entry : layout_->entries()) full[entry.name] = &entry.full;
  for (OptimizedTensor& tensor : order) tensor.sizes = full.at(tensor.name)->sizes().vec();
  return order;
}

void ShardedOptimizer::load(torch::serialize::InputArchive& archive) {
  c10::IValue saved;
  saved_world_size_ = layout_->world_size();
  loaded_whole_ = false;
  if (!archive.try_read(kShardedOptimizerKey, saved)) {
    // A run without sharding wrote the whole state: this rank takes its chunk of it.
    torch::serialize::InputArchive chunk =
        reshard_whole_state(archive, optimizer_order(), layout_->rank(), layout_->world_size());
    inner_->load(chunk);
    loaded_whole_ = true;
    return;
  }
  ShardManifest manifest;
  try {
    manifest = parse_shard_manifest(saved.toStringRef());
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorKind::recipe, std::string("the checkpoint is damaged: ") + e.what(), {}, "trainer.resume");
  }
  std::vector<OptimizedTensor> ours;
  for (const ShardLayout::Entry& entry : layout_->entries()) {
    ours.push_back({entry.name, entry.full.sizes().vec(), entry.shard.scalar_type()});
  }
  const std::string difference = first_tensor_difference(manifest, ours);
  if (!difference.empty()) {
    throw Error(ErrorKind::recipe, "the checkpoint's optimizer state does not fit this run: " + difference, {},
                "trainer.resume", kSameRunHint);
  }
  saved_world_size_ = manifest.world_size;
}

void ShardedOptimizer::save_shard(const std::filesystem::path& file) {
  torch::serialize::OutputArchive archive;
  inner_->save(archive);
  write_file_atomically(optimizer_shard_file(file, layout_->rank(), layout_->world_size()),
                        [&](std::ostream& out) { archive.save_to(out); });
  if (masters_on_shards_) {
    // Every rank saves its shard before rank 0 writes the checkpoint (and may write it again
    // with the callbacks' state, before the whole-model scope ends): the whole masters for
    // it, kept by rank 0 alone until that scope ends.
    whole_masters_ = layout_->gather_shards_whole(communicator_);
    if (layout_->rank() != 0) whole_masters_.clear();
  }
}

void ShardedOptimizer::load_shard(const std::filesystem::path& file) {
  if (loaded_whole_) return;
  torch::serialize::InputArchive archive;
  if (saved_world_size_ == layout_->world_size()) {
    read_optimizer_shard(file, layout_->rank(), layout_->world_size(), archive);
  } else {
    archive = reshard_saved_state(file, saved_world_size_, optimizer_order(), layout_->rank(), layout_->world_size());
  }
  inner_->load(archive);
}

std::unique_ptr<ShardedOptimizer> shard_optimizer(
    const DistributedOptions& options, const Communicator* communicator,
    const std::vector<std::pair<std::string, at::Tensor>>& full,
    const std::function<std::unique_ptr<Optimizer>(const OptimizerContext&)>& build, const ModelBlocks& blocks) {
  if (options.sharding == Sharding::none || communicator == nullptr) return nullptr;
  const auto* group = dynamic_cast<const ProcessGroupCommunicator*>(communicator);
  if (group == nullptr || group->world_size() < 2) {
    warn(std::string("trainer.distributed.sharding: ") + sharding_name(options.sharding) +
         " with one rank: nothing to shard, the optimizer keeps its whole state");
    return nullptr;
  }
  const auto bucket_bytes = static_cast<std::int64_t>(options.bucket_mb * 1024.0 * 1024.0);
  std::vector<int> units;
  if (options.sharding == Sharding::parameters) {
    if (!blocks.model) throw std::logic_error("sharding: parameters without the model");
    units = unit_of_each(full, *blocks.model, blocks.blocks);
  }
  auto layout = std::make_unique<ShardLayout>(full, group->rank(), group->world_size(), bucket_bytes, units,
                                              blocks.masters_on_shards ? at::kFloat : at::ScalarType::Undefined);
  std::unique_ptr<ParameterUnits> parameter_units;
  if (options.sharding == Sharding::parameters) {
    parameter_units =
        std::make_unique<ParameterUnits>(blocks.model, *layout, units, blocks.blocks, *group, options.prefetch);
    if (parameter_units->unit_count() == 0) {
      warn(
          "trainer.distributed.sharding: parameters, but the model routes no block through mixt::call_block "
          "(or its blocks own no weight of their own): every weight stays whole, as with sharding: gradients");
    }
  }
  OptimizerContext context;
  context.named_parameters = layout->named_shards();
  return std::make_unique<ShardedOptimizer>(build(context), std::move(layout), options.sharding, *group,
                                            std::move(parameter_units), blocks.masters_on_shards);
}

}  // namespace mixt::distributed
