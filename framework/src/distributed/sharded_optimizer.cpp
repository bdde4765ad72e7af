#include "distributed/sharded_optimizer.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "common/atomic_file.h"
#include "common/warnings.h"
#include "mixt/error.h"

namespace mixt::distributed {

namespace {

// The first line where two manifests differ, for the error.
std::string first_difference(const std::string& saved, const std::string& ours) {
  std::size_t a = 0, b = 0;
  while (a < saved.size() || b < ours.size()) {
    const std::size_t a_end = std::min(saved.find('\n', a), saved.size());
    const std::size_t b_end = std::min(ours.find('\n', b), ours.size());
    const std::string saved_line = saved.substr(a, a_end - a), our_line = ours.substr(b, b_end - b);
    if (saved_line != our_line) return "the checkpoint's '" + saved_line + "', this run's '" + our_line + "'";
    a = a_end + 1;
    b = b_end + 1;
  }
  return {};
}
}  // namespace

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<Optimizer> inner, std::unique_ptr<ShardLayout> layout, Sharding mode,
                                   const ProcessGroupCommunicator& communicator, std::unique_ptr<ParameterUnits> units)
    : inner_(std::move(inner)),
      layout_(std::move(layout)),
      mode_(mode),
      communicator_(communicator),
      units_(std::move(units)) {
  layout_->copy_full_into_shards();
  if (reduce_scatters_gradients(mode_)) {
    reduce_scatter_ = std::make_unique<GradientReduceScatter>(*layout_, communicator_);
  }
  if (units_) reduce_scatter_->set_on_bucket_taken([this](std::size_t bucket) { units_->on_bucket_taken(bucket); });
}

void ShardedOptimizer::start_from_full() {
  layout_->copy_full_into_shards();
  if (units_) units_->release_all();
}

void ShardedOptimizer::gather_whole_model() {
  if (units_) units_->gather_whole();
}

void ShardedOptimizer::release_whole_model() {
  if (units_) units_->release_whole();
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

void ShardedOptimizer::load(torch::serialize::InputArchive& archive) {
  c10::IValue saved;
  const std::string ours = manifest();
  if (!archive.try_read(kShardedOptimizerKey, saved)) {
    throw Error(ErrorKind::recipe,
                "the checkpoint's optimizer state is whole (a run without trainer.distributed.sharding wrote it), "
                "but this run shards it over " +
                    std::to_string(layout_->world_size()) + " ranks",
                {}, "trainer.distributed.sharding", "resume it with sharding: none (the default)");
  }
  const std::string theirs = saved.toStringRef();
  if (theirs != ours) {
    throw Error(ErrorKind::recipe,
                "the checkpoint's optimizer shards do not fit this run: " + first_difference(theirs, ours), {},
                "trainer.distributed.sharding",
                "resume on as many ranks, with the same sharding and model, as the run that wrote it (its "
                "recipe.yaml and log.txt say which); mixt cannot yet reshard optimizer state: to go on with "
                "other ranks, mixt export the weights and start from them (model.weights), with a fresh optimizer");
  }
}

void ShardedOptimizer::save_shard(const std::filesystem::path& file) {
  torch::serialize::OutputArchive archive;
  inner_->save(archive);
  write_file_atomically(optimizer_shard_file(file, layout_->rank(), layout_->world_size()),
                        [&](std::ostream& out) { archive.save_to(out); });
}

void ShardedOptimizer::load_shard(const std::filesystem::path& file) {
  const std::filesystem::path shard = optimizer_shard_file(file, layout_->rank(), layout_->world_size());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(shard, ec)) {
    throw Error(ErrorKind::recipe,
                "the checkpoint " + file.string() + " has no optimizer shard for rank " +
                    std::to_string(layout_->rank()) + " of " + std::to_string(layout_->world_size()) + " (" +
                    shard.filename().string() + ")",
                {}, "trainer.resume",
                "resume on as many ranks as the run that wrote it, with its shard files beside the checkpoint");
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(shard.string());
  } catch (const c10::Error& error) {
    throw runtime_error("cannot read the optimizer shard " + shard.string() + ": " + error.what_without_backtrace());
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
  auto layout = std::make_unique<ShardLayout>(full, group->rank(), group->world_size(), bucket_bytes, units);
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
                                            std::move(parameter_units));
}

}  // namespace mixt::distributed
