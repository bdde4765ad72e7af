// ZeRO stages 1 and 2 (Rajbhandari et al. 2020) around any element-wise optimizer plugin:
// each rank builds the recipe's optimizer over its shards of the tensors it updates
// (distributed/shard_layout.h), so the optimizer state (AdamW's two moments, SGD's
// momentum) exists once over all ranks, not once a rank; after each step the updated shards
// are all-gathered into the full tensors, which every rank keeps for its forward pass.
//
//   optimizer  (ZeRO-1) gradients all-reduced as in the replicated run, then cut to the shard
//   gradients  (ZeRO-2) gradients reduce-scattered: each rank receives only its shard's sum
//   parameters (ZeRO-3) as gradients, and each block's weights released between its uses
//              (distributed/parameter_units.h): the step gathers only the root's
//
// The precision policy still sees the full tensors (its masters, or the model's parameters):
// gradients_ready() hands the model's gradients to them, then take_gradients() shards them;
// unscale(), clipping and step() then see the shards (Optimizer::parameters()).
#pragma once

#include <functional>
#include <memory>

#include "common/optimizer_shards.h"
#include "distributed/gradient_reduce_scatter.h"
#include "distributed/optimizer_resharding.h"
#include "distributed/options.h"
#include "distributed/parameter_units.h"
#include "distributed/shard_layout.h"
#include "mixt/optimizer.h"

namespace mixt::distributed {

class ShardedOptimizer final : public Optimizer, public OptimizerShards {
 public:
  // `inner`: the recipe's optimizer, built over layout->named_shards().
  // `units`: the blocks' weights (sharding: parameters only) and the layout's entry of each.
  // `masters_on_shards`: the layout's float32 shards are a master-weight policy's masters.
  ShardedOptimizer(std::unique_ptr<Optimizer> inner, std::unique_ptr<ShardLayout> layout, Sharding mode,
                   const ProcessGroupCommunicator& communicator, std::unique_ptr<ParameterUnits> units = nullptr,
                   bool masters_on_shards = false);

  void step() override;
  void zero_grad() override;
  bool can_step_scaled() const override { return inner_->can_step_scaled(); }
  void step_scaled(const at::Tensor& grad_scale, const at::Tensor& found_inf) override;
  std::vector<at::Tensor> parameters() const override { return inner_->parameters(); }
  double learning_rate() const override { return inner_->learning_rate(); }
  void set_learning_rate(double lr) override { inner_->set_learning_rate(lr); }
  // The checkpoint's optimizer entry holds what the shards fit (mode, world size, tensors);
  // the state itself is in each rank's shard file (save_shard). A checkpoint of other ranks,
  // or another sharding mode, of the same tensors is resharded (distributed/optimizer_resharding.h),
  // and so is a whole optimizer state.
  void save(torch::serialize::OutputArchive& archive) override;
  void load(torch::serialize::InputArchive& archive) override;

  void start_from_full() override;
  void gather_whole_model() override;
  void release_whole_model() override;
  std::string report() const override { return units_ ? units_->report() : std::string(); }
  void prepare_backward(bool last) override;
  void take_gradients() override;
  at::Tensor norm_over_ranks(const at::Tensor& local_norm) const override;
  void save_shard(const std::filesystem::path& file) override;
  void load_shard(const std::filesystem::path& file) override;
  void save_masters(torch::serialize::OutputArchive& precision) const override;
  void load_masters(torch::serialize::InputArchive& precision) override;

  const ShardLayout& layout() const { return *layout_; }
  // The blocks' weights under sharding: parameters; null otherwise.
  const ParameterUnits* units() const { return units_.get(); }
  const ProcessGroupCommunicator& communicator() const { return communicator_; }

 private:
  std::string manifest() const;
  // The tensors inner_ updates, in its order, by their whole shapes: what resharding maps.
  std::vector<OptimizedTensor> optimizer_order() const;
  // The updated shards into the weights every rank keeps whole (all of them, but the
  // blocks' under sharding: parameters).
  void gather_after_step();

  std::unique_ptr<Optimizer> inner_;
  std::unique_ptr<ShardLayout> layout_;
  Sharding mode_;
  const ProcessGroupCommunicator& communicator_;
  std::unique_ptr<GradientReduceScatter> reduce_scatter_;  // `gradients` and `parameters`
  std::unique_ptr<ParameterUnits> units_;                  // `parameters` only
  // What load() found: the world size whose shard files load_shard() reads (resharded when
  // not ours), or the whole state, already resharded.
  int saved_world_size_ = 0;
  bool loaded_whole_ = false;
  // A master-weight policy's masters kept as this rank's float32 shards (ShardLayout's
  // shard dtype): gathered whole as the shards are saved, for rank 0's checkpoint, which
  // keeps them until the outermost WholeModel scope ends (other ranks drop them at once).
  bool masters_on_shards_;
  int whole_depth_ = 0;
  ShardLayout::NamedTensors whole_masters_;
  bool shards_from_checkpoint_ = false;  // load_masters() cut them: start_from_full() keeps them
};

// What sharding: parameters needs of the model: the model, and the blocks it routes through
// mixt::call_block (assembly/routing_probe.h), which become its units; and whether the
// shards keep a master-weight policy's float32 masters (MasterWeights::keep_on_shards).
struct ModelBlocks {
  std::shared_ptr<torch::nn::Module> model;
  std::vector<std::string> blocks;
  bool masters_on_shards = false;
};

// The recipe's optimizer (`build` makes it from a context) over this rank's shards of
// `full`, when `options` asks for sharding and the run has more than one rank; null
// otherwise (a single rank is warned about: nothing to shard).
std::unique_ptr<ShardedOptimizer> shard_optimizer(
    const DistributedOptions& options, const Communicator* communicator,
    const std::vector<std::pair<std::string, at::Tensor>>& full,
    const std::function<std::unique_ptr<Optimizer>(const OptimizerContext&)>& build, const ModelBlocks& blocks = {});

}  // namespace mixt::distributed
