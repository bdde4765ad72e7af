// What the recipe chose for the submodules a model routes through mixt::call_submodule
// (precision.fp32_modules, trainer.activation_checkpointing), and what the model has routed
// so far: one entry per model, kept beside the models rather than inside mixt::Model so that
// the SDK class layout (and with it the plugin ABI) does not change.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>


namespace mixt::routing {

struct RoutedModel {
  std::weak_ptr<const torch::nn::Module> owner;
  bool owned = false;
  std::set<std::string, std::less<>> fp32_listed, fp32_routed;
  bool checkpoint_all_blocks = false;  // activation_checkpointing: all
  std::set<std::string, std::less<>> checkpoint_listed, checkpoint_routed;
  std::vector<std::string> checkpointed;  // routed and recomputing, in routing order
  bool checkpoints() const { return checkpoint_all_blocks || !checkpoint_listed.empty(); }
  bool empty() const { return fp32_listed.empty() && !checkpoints(); }
};

std::mutex& mutex();
// Under mutex(). The entry of `model`, or null; an entry whose model is gone is dropped (a
// model built later at a freed model's address must not inherit its choices).
RoutedModel* find(const torch::nn::Module& model);
// Under mutex(). The entry of `model`, made when absent.
RoutedModel& find_or_add(const torch::nn::Module& model);
// Under mutex(). Drops the entry of `model` when it holds no choice any more.
void drop_if_empty(const torch::nn::Module& model);

}  // namespace mixt::routing
