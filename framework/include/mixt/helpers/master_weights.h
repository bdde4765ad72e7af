// mixt/helpers/master_weights.h — for a precision policy whose model runs in reduced
// precision while the optimizer updates float32 copies ("masters") of its parameters, as
// bf16_master and fp16_master do. Each step of the precision contract is one call:
//
//   setup()                  cast_model(): the model's floating-point tensors to float16 or
//                            bfloat16, but for the ones a policy keeps (fp32_modules, batch norm)
//   optimizer_parameters()   make(): one float32 master per trainable parameter
//   gradients_ready()        hand_gradients(): the model's gradients become the masters'
//   step()                   optimizer.step() on the masters, then round_into_model()
//   save()/load()            the masters, as "master_weights" (what `mixt export` writes)
//
// A policy that rounds differently (stochastic rounding) walks pairs() in step() instead of
// calling round_into_model().
//
// Under trainer.distributed.sharding (any mode) the host keeps the masters instead (since
// ABI 6.6), for a policy that derives from ShardableMasters: each rank holds its float32
// shard of every parameter, and the host rounds the shards into the model as it gathers
// them (FSDP2's param_dtype). keep_on_shards() then turns the calls above into what that
// needs, so the policy's code stays the same.
//
// cast_model() and lies_under() serve any policy that casts its model (bf16_true too).
#pragma once

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "mixt/error.h"
#include "mixt/helpers/named_tensors_archive.h"

namespace mixt {

// Whether `name` ("layer4.0.conv1.weight") lies under one of the listed submodules.
inline bool lies_under(const std::string& name, const std::vector<std::string>& modules) {
  for (const std::string& module : modules) {
    if (name.rfind(module + ".", 0) == 0) return true;
  }
  return false;
}

// Casts the model's floating-point parameters and buffers to `dtype`, except those whose
// qualified name `keep` accepts. In place (set_data), so the optimizer and every reference
// to a parameter see the cast tensor.
inline void cast_model(torch::nn::Module& model, at::ScalarType dtype,
                       const std::function<bool(const std::string&)>& keep) {
  at::NoGradGuard no_grad;
  const auto cast = [&](const std::string& name, const at::Tensor& tensor) {
    if (tensor.is_floating_point() && !keep(name)) tensor.set_data(tensor.data().to(dtype));
  };
  for (const auto& item : model.named_parameters(/*recurse=*/true)) cast(item.key(), item.value());
  for (const auto& item : model.named_buffers(/*recurse=*/true)) cast(item.key(), item.value());
}

class MasterWeights {
 public:
  // One trainable parameter of the model and its master, in the order of make().
  struct Pair {
    std::string name;      // the parameter's qualified name in the model
    at::Tensor parameter;  // the model's, reduced precision (float32 where the policy keeps it)
    at::Tensor master;     // float32, what the optimizer updates
  };

  // Since ABI 6.6, called by the host (through ShardableMasters) before make(): the masters
  // are the ranks' float32 shards of the model's parameters, which the host keeps, steps,
  // rounds into the model and writes into checkpoints as "master_weights". From then on
  // make() gives the model's own parameters (the host shards them in float32) and pairs()
  // is empty; hand_gradients(), round_into_model(), save() and load() do nothing.
  void keep_on_shards() { on_shards_ = true; }
  bool on_shards() const { return on_shards_; }

  // One float32 master per trainable parameter of `model`, by name: what the optimizer updates.
  std::vector<std::pair<std::string, at::Tensor>> make(torch::nn::Module& model) {
    std::vector<std::pair<std::string, at::Tensor>> masters;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (!item.value().requires_grad()) continue;
      if (on_shards_) {
        masters.emplace_back(item.key(), item.value());
        continue;
      }
      const at::Tensor master = item.value().detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      pairs_.push_back({item.key(), item.value(), master});
      masters.emplace_back(item.key(), master);
    }
    return masters;
  }

  // The model's gradients, in float32, become the masters'. The model's own are dropped:
  // the optimizer's zero_grad() reaches only the masters, and the next backward must not add
  // to these.
  void hand_gradients() {
    at::NoGradGuard no_grad;
    for (Pair& pair : pairs_) {
      const at::Tensor gradient = pair.parameter.grad();
      pair.master.mutable_grad() =
          gradient.defined() ? gradient.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true) : at::Tensor();
      pair.parameter.mutable_grad() = at::Tensor();
    }
  }

  // After the optimizer's step: the masters, rounded to the model's dtype, into the model.
  // Their float32 gradients are dropped here rather than at the next zero_grad(), so that
  // they do not take 4 bytes a parameter through the next forward and backward.
  void round_into_model() {
    at::NoGradGuard no_grad;
    for (Pair& pair : pairs_) {
      pair.parameter.copy_(pair.master);
      pair.master.mutable_grad() = at::Tensor();
    }
  }

  // Every (name, parameter, master), for a policy that moves the masters into the model
  // itself: after the optimizer's step, write each master's rounding into `parameter`
  // (in place, under NoGradGuard) and drop its gradient (`master.mutable_grad() = at::Tensor()`), as
  // round_into_model() does.
  const std::vector<Pair>& pairs() const { return pairs_; }

  // The masters are the real weights: checkpoints keep them (a resume continues them bit for
  // bit) and `mixt export` writes them.
  void save(torch::serialize::OutputArchive& archive) const {
    if (on_shards_) return;
    NamedTensors masters;
    for (const Pair& pair : pairs_) masters.emplace_back(pair.name, pair.master);
    torch::serialize::OutputArchive nested;
    write_named_tensors(nested, masters);
    archive.write("master_weights", nested);
  }

  void load(torch::serialize::InputArchive& archive) {
    if (on_shards_) return;
    torch::serialize::InputArchive nested;
    if (!archive.try_read("master_weights", nested)) {
      throw runtime_error("the checkpoint holds no master weights: another precision policy wrote it",
                          "resume it with the policy it was written with");
    }
    const NamedTensors saved = read_named_tensors(nested);
    if (saved.size() != pairs_.size()) {
      throw runtime_error("the checkpoint's master weights do not match the model's parameters");
    }
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < saved.size(); ++i) {
      if (saved[i].first != pairs_[i].name || saved[i].second.sizes() != pairs_[i].master.sizes()) {
        throw runtime_error("the checkpoint's master weight " + saved[i].first + " is not the model's " +
                            pairs_[i].name);
      }
      pairs_[i].master.copy_(saved[i].second);
    }
  }

 private:
  std::vector<Pair> pairs_;
  bool on_shards_ = false;
};

// Since ABI 6.6. A policy whose masters are a MasterWeights derives from this besides
// mixt::PrecisionPolicy, so that trainer.distributed.sharding can keep them as the ranks'
// shards (MasterWeights::keep_on_shards); the host finds it with a dynamic_cast (its type
// information lives in libmixt). A master-weight policy without it keeps its whole masters
// under sharding: optimizer and gradients, and is refused under sharding: parameters.
class ShardableMasters {
 public:
  virtual ~ShardableMasters();
  virtual MasterWeights& master_weights() = 0;
};

}  // namespace mixt
