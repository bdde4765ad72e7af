// ZeRO stages 1 and 2 (Rajbhandari et al. 2020) around any element-wise optimizer plugin:
// each rank builds the recipe's optimizer over its shards of the tensors it updates
// (distributed/shard_layout.h), so the optimizer state (AdamW's two moments, SGD's
// momentum) exists once over all ranks, not once a rank; after each step the updated shards
// are all-gathered into the full tensors, which every rank keeps for its forward pass.
//
//   optimizer  (ZeRO-1) gradients all-reduced as in the replicated run, then cut to the shard
//   gradients  (ZeRO-2) gradients reduce-scattered: each rank receives only its shard's sum
//
// The precision policy still sees the full tensors (its masters, or the model's parameters):
// gradients_ready() hands the model's gradients to them, then take_gradients() shards them;
// unscale(), clipping and step() then see the shards (Optimizer::parameters()).
#pragma once

#include <functional>
#include <memory>

#include "common/optimizer_shards.h"
#include "distributed/gradient_reduce_scatter.h"
#include "distributed/options.h"
#include "distributed/shard_layout.h"
#include "mixt/optimizer.h"

namespace mixt::distributed {

class ShardedOptimizer final : public Optimizer, public OptimizerShards {
 public:
  // `inner`: the recipe's optimizer, built over layout->named_shards().
  ShardedOptimizer(std::unique_ptr<Optimizer> inner, std::unique_ptr<ShardLayout> layout, Sharding mode,
                   const ProcessGroupCommunicator& communicator);

  void step() override;
  void zero_grad() override;
  bool can_step_scaled() const override { return inner_->can_step_scaled(); }
  void step_scaled(const at::Tensor& grad_scale, const at::Tensor& found_inf) override;
  std::vector<at::Tensor> parameters() const override { return inner_->parameters(); }
  double learning_rate() const override { return inner_->learning_rate(); }
  void set_learning_rate(double lr) override { inner_->set_learning_rate(lr); }
  // The checkpoint's optimizer entry holds what the shards fit (mode, world size, tensors);
  // the state itself is in each rank's shard file (save_shard).
  void save(torch::serialize::OutputArchive& archive) override;
  void load(torch::serialize::InputArchive& archive) override;

  void start_from_full() override { layout_->copy_full_into_shards(); }
  void prepare_backward(bool last) override;
  void take_gradients() override;
  at::Tensor norm_over_ranks(const at::Tensor& local_norm) const override;
  void save_shard(const std::filesystem::path& file) override;
  void load_shard(const std::filesystem::path& file) override;

  const ShardLayout& layout() const { return *layout_; }

 private:
  std::string manifest() const;

  std::unique_ptr<Optimizer> inner_;
  std::unique_ptr<ShardLayout> layout_;
  Sharding mode_;
  const ProcessGroupCommunicator& communicator_;
  std::unique_ptr<GradientReduceScatter> reduce_scatter_;  // `gradients` only
};

// The recipe's optimizer (`build` makes it from a context) over this rank's shards of
// `full`, when `options` asks for sharding and the run has more than one rank; null
// otherwise (a single rank is warned about: nothing to shard).
std::unique_ptr<ShardedOptimizer> shard_optimizer(
    const DistributedOptions& options, const Communicator* communicator,
    const std::vector<std::pair<std::string, at::Tensor>>& full,
    const std::function<std::unique_ptr<Optimizer>(const OptimizerContext&)>& build);

}  // namespace mixt::distributed
