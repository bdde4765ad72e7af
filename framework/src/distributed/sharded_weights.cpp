#include "distributed/sharded_weights.h"

#include <stdexcept>
#include <vector>

namespace mixt::distributed {

ShardedWeights::ShardedWeights(std::shared_ptr<const torch::nn::Module> model, const ShardLayout& layout,
                               const ProcessGroupCommunicator& communicator)
    : model_(std::move(model)), layout_(layout), communicator_(communicator) {
  std::map<const c10::TensorImpl*, std::size_t> entry_of;
  for (std::size_t i = 0; i < layout_.entries().size(); ++i) {
    entry_of[layout_.entries()[i].full.unsafeGetTensorImpl()] = i;
  }
  for (const auto& [name, tensor] : state_dict(*model_)) {
    const auto found = entry_of.find(tensor.unsafeGetTensorImpl());
    if (found != entry_of.end()) entry_by_name_[name] = found->second;
  }
}

NamedTensors ShardedWeights::held() const {
  NamedTensors held = state_dict(*model_);
  for (auto& [name, tensor] : held) {
    const auto found = entry_by_name_.find(name);
    if (found == entry_by_name_.end()) continue;
    const at::Tensor& shard = layout_.entries()[found->second].shard;
    // A master-weight policy's float32 shard: the model's weight is its rounding.
    tensor = shard.scalar_type() == tensor.scalar_type() ? shard : shard.to(tensor.scalar_type());
  }
  return held;
}

NamedTensors ShardedWeights::gather(const NamedTensors& chunks) const {
  std::vector<std::size_t> entries, positions;
  std::vector<at::Tensor> sharded;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const auto found = entry_by_name_.find(chunks[k].first);
    if (found == entry_by_name_.end()) continue;
    entries.push_back(found->second);
    positions.push_back(k);
    sharded.push_back(chunks[k].second);
  }
  const std::vector<at::Tensor> whole =
      layout_.gather_whole(entries, sharded, communicator_, "all_gather of a callback's chunks of the weights");
  NamedTensors gathered = chunks;
  for (std::size_t j = 0; j < positions.size(); ++j) gathered[positions[j]].second = whole[j];
  return gathered;
}

NamedTensors ShardedWeights::cut(const NamedTensors& whole) const {
  NamedTensors chunks = whole;
  for (auto& [name, tensor] : chunks) {
    const auto found = entry_by_name_.find(name);
    if (found == entry_by_name_.end()) continue;
    const ShardLayout::Entry& entry = layout_.entries()[found->second];
    if (tensor.sizes() != entry.full.sizes()) {
      throw std::invalid_argument("'" + name + "' is not shaped as the model's weight " + c10::str(entry.full.sizes()) +
                                  ": it cannot be cut into this rank's chunk");
    }
    tensor = layout_.chunk_of(found->second, tensor);
  }
  return chunks;
}

}  // namespace mixt::distributed
