// The weights of a sharding: parameters run as a callback sees them (mixt/weight_shards.h):
// each weight the optimizer updates as this rank's chunk of it, read from the layout's
// shards (in the model's dtype), which are current after every step, unlike a block's
// weights, which have storage only while the block computes.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "distributed/shard_layout.h"
#include "mixt/weight_shards.h"

namespace mixt::distributed {

class ShardedWeights final : public WeightShards {
 public:
  // `layout`'s full tensors are `model`'s own parameters (sharding: parameters makes them so).
  ShardedWeights(std::shared_ptr<const torch::nn::Module> model, const ShardLayout& layout,
                 const ProcessGroupCommunicator& communicator);

  bool sharded() const override { return true; }
  NamedTensors held() const override;
  NamedTensors gather(const NamedTensors& chunks) const override;
  NamedTensors cut(const NamedTensors& whole) const override;

 private:
  std::shared_ptr<const torch::nn::Module> model_;
  const ShardLayout& layout_;
  const ProcessGroupCommunicator& communicator_;
  std::map<std::string, std::size_t> entry_by_name_;  // state-dict name (tied ones too) -> layout entry
};

}  // namespace mixt::distributed
