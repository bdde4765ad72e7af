#include "distributed/sync_batchnorm.h"

#include <torch/nn/modules/batchnorm.h>

#include <vector>

#include "mixt/helpers/batch_norm.h"

namespace mixt {
namespace {

bool is_torch_batch_norm(torch::nn::Module& module) {
  return dynamic_cast<torch::nn::BatchNorm1dImpl*>(&module) || dynamic_cast<torch::nn::BatchNorm2dImpl*>(&module) ||
         dynamic_cast<torch::nn::BatchNorm3dImpl*>(&module);
}

std::string listed(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 5;
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

}  // namespace

std::size_t synchronise_batch_norm(torch::nn::Module& model, const Communicator* communicator,
                                   const Config& distributed_section,
                                   const std::function<void(const std::string&)>& warn) {
  std::vector<SynchronisedBatchNorm*> layers;
  std::vector<std::string> plain;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    torch::nn::Module& module = *item.value();
    if (auto* layer = dynamic_cast<SynchronisedBatchNorm*>(&module)) {
      layers.push_back(layer);
    } else if (is_torch_batch_norm(module)) {
      plain.push_back(item.key().empty() ? "(the model itself)" : item.key());
    }
  }
  if (!plain.empty()) {
    distributed_section.fail(
        "sync_batchnorm",
        "the model's batch-norm layers " + listed(plain) +
            " are torch::nn batch norm, which cannot synchronise across ranks",
        "build them as mixt::BatchNorm1d/2d/3d (mixt/helpers/batch_norm.h, a drop-in subclass), or remove "
        "sync_batchnorm");
  }
  if (layers.empty()) {
    warn(distributed_section.location("sync_batchnorm").str() +
         ": the model has no batch-norm layers: sync_batchnorm has nothing to synchronise");
  }
  for (SynchronisedBatchNorm* layer : layers) layer->synchronise_over(communicator);
  return layers.size();
}

}  // namespace mixt
