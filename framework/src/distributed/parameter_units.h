// ZeRO-3 (trainer.distributed.sharding: parameters), as FSDP2's fully_shard with
// reshard_after_forward: each block the model routes through mixt::call_block is a *unit*
// whose weights have storage only while it computes. They are all-gathered from the ranks'
// shards as the unit's forward starts (routing::BlockGate) and released as it returns
// (SubmoduleObserver); a hook on the unit's output gathers them again when backward reaches
// it, and they are released once the unit's gradients are reduce-scattered
// (GradientReduceScatter::set_on_bucket_taken). The parameters outside every block
// (embeddings, final norm, head) form the root, which stays whole on every rank, as
// torchtitan keeps the last norm and head, and is all-gathered after each step as in ZeRO-2.
//
// With prefetch, the next unit's all-gather starts as a unit's forward starts (the next in
// the order the first forward entered them) and the previous unit's as backward reaches a
// unit, as FSDP2 prefetches: two units are whole at once, and the collective runs while the
// unit computes. Every rank starts the same gathers in the same order.
//
// A weight is released in place: its StorageImpl's bytes go, its shape stays (numel() > 0,
// storage().nbytes() == 0). Tensors autograd saved from it (a transpose) share that storage,
// so they give up their bytes too and see the refill: swapping the tensor's data would keep
// them alive. Outside the forward and backward, code that reads the weights takes a
// WholeModel scope (the epoch's checksum and checkpoint, the end of the run).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/shard_layout.h"
#include "mixt/helpers/fp32_modules.h"
#include "sdk/helpers/block_gates.h"

namespace mixt::distributed {

// Which unit each of `full`'s tensors belongs to: the index into `blocks` of the block every
// one of its names in `model` lies under (the longest such block), or -1 for the root (a
// tensor outside every block, shared with another, or not alone in its storage).
std::vector<int> unit_of_each(const std::vector<std::pair<std::string, at::Tensor>>& full,
                              const torch::nn::Module& model, const std::vector<std::string>& blocks);

class ParameterUnits final : public routing::BlockGate, public SubmoduleObserver {
 public:
  // `units[i]`: unit_of_each()'s answer for layout.entries()[i]; the layout's buckets keep
  // to one unit each (ShardLayout's `groups`). Installs itself on `model`.
  ParameterUnits(std::shared_ptr<torch::nn::Module> model, ShardLayout& layout, const std::vector<int>& units,
                 const std::vector<std::string>& blocks, const ProcessGroupCommunicator& communicator, bool prefetch);
  ~ParameterUnits() override;
  ParameterUnits(const ParameterUnits&) = delete;
  ParameterUnits& operator=(const ParameterUnits&) = delete;

  // Every unit's weights released (after the shards are cut from them).
  void release_all();
  // After the optimizer step: the root's updated shards gathered; the units stay released.
  void after_step();
  // Every unit whole until release_whole() (nested calls count), which leaves whole the
  // units that were whole before.
  void gather_whole();
  void release_whole();
  // Before each backward: no bucket of it done yet.
  void prepare_backward();
  // A bucket's gradients are done: the unit is released once all its buckets are.
  void on_bucket_taken(std::size_t bucket);

  void entering(std::string_view block) override;
  void observe(std::string_view name, const at::Tensor& output) override;

  std::size_t unit_count() const { return units_.size(); }
  // How many units were whole at once at most, outside whole-model scopes, as a line.
  std::string report() const;
  // Bytes of the units' full weights, and of the root's (for the start-up line).
  std::int64_t unit_bytes() const;
  std::int64_t root_bytes() const;

 private:
  struct Unit {
    std::string name;
    std::vector<std::size_t> entries;
    std::size_t buckets = 0;
    std::size_t buckets_taken = 0;
    bool gathered = true;  // its storage is there (its values too, unless `pending`)
    std::optional<ShardLayout::PendingGather> pending;
  };
  void gather_locked(Unit& unit);
  void prefetch_locked(std::size_t unit);
  // The unit `step` places after `unit` in the first forward's order (-1 before), if any.
  std::optional<std::size_t> neighbour(std::size_t unit, int step) const;
  void release_locked(Unit& unit);
  Unit* find_locked(std::string_view block);

  std::shared_ptr<torch::nn::Module> model_;
  ShardLayout& layout_;
  const ProcessGroupCommunicator& communicator_;
  bool prefetch_;
  std::vector<Unit> units_;
  std::vector<std::size_t> order_;  // units as the first forward entered them
  std::vector<int> place_;          // each unit's index in order_, -1 until entered
  bool learning_order_ = true;
  std::map<std::string, std::size_t, std::less<>> unit_by_name_;
  std::vector<int> unit_of_bucket_;         // -1: the root's
  std::vector<std::size_t> storage_bytes_;  // of each entry's full tensor
  mutable std::mutex mutex_;                // hooks may run on autograd's device threads
  int whole_ = 0;
  std::vector<bool> whole_before_;  // which units were whole when the outermost scope began
  int gathered_ = 0;  // units whole now (all of them at first: the model is built whole)
  int most_gathered_ = 0;
};

}  // namespace mixt::distributed
