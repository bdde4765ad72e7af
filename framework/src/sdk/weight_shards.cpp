// mixt/weight_shards.h: the interfaces' key functions (their type information emitted once,
// here, for the host's dynamic_cast), and the weights of a run that keeps the model whole.
#include "mixt/weight_shards.h"

namespace mixt {

WeightShards::~WeightShards() = default;
GathersForCheckpoint::~GathersForCheckpoint() = default;

namespace {

class WholeWeights final : public WeightShards {
 public:
  explicit WholeWeights(std::shared_ptr<const torch::nn::Module> model) : model_(std::move(model)) {}
  bool sharded() const override { return false; }
  NamedTensors held() const override { return model_ ? state_dict(*model_) : NamedTensors{}; }
  NamedTensors gather(const NamedTensors& chunks) const override { return chunks; }
  NamedTensors cut(const NamedTensors& whole) const override { return whole; }

 private:
  std::shared_ptr<const torch::nn::Module> model_;
};

}  // namespace

std::shared_ptr<const WeightShards> whole_weights(std::shared_ptr<const torch::nn::Module> model) {
  return std::make_shared<WholeWeights>(std::move(model));
}

}  // namespace mixt
