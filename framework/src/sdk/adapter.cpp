// mixt/adapter.h: the adapter's key function and PEFT's target_modules matching.
#include "mixt/adapter.h"

#include <algorithm>

#include "mixt/error.h"

namespace mixt {

Adapter::~Adapter() = default;
MergesIntoBase::~MergesIntoBase() = default;

void merge_adapter(Adapter& adapter, const std::string& name, torch::nn::Module& model) {
  auto* merging = dynamic_cast<MergesIntoBase*>(&adapter);
  if (merging == nullptr) {
    throw usage_error("the adapter '" + name + "' cannot merge into the base weights (it has no mixt::MergesIntoBase)",
                      "export without --merge-adapter: the base and the adapter's tensors side by side, or give "
                      "PEFT the run's adapter/ folder");
  }
  merging->merge(model);
}

namespace {
// PEFT's check_target_module_exists for a list: the key equals the pattern, or ends with
// "." + pattern.
bool matches(const std::string& name, const std::string& pattern) {
  if (name == pattern) return true;
  return name.size() > pattern.size() && name.ends_with(pattern) && name[name.size() - pattern.size() - 1] == '.';
}
}  // namespace

std::vector<LinearLayer> adapter_targets(torch::nn::Module& model, const std::vector<std::string>& patterns,
                                         const RecipeSection& where, std::string_view key) {
  const std::vector<LinearLayer> layers = linear_layers(model);
  if (patterns.empty()) where.fail(key, "no target modules named", "e.g. [q_proj, v_proj]");
  for (const std::string& pattern : patterns) {
    if (std::any_of(layers.begin(), layers.end(),
                    [&](const LinearLayer& layer) { return matches(layer.name, pattern); })) {
      continue;
    }
    std::string names;
    for (std::size_t i = 0; i < layers.size(); ++i) names += (i ? ", " : "") + layers[i].name;
    where.fail(key, "'" + pattern + "' matches none of the model's linear layers",
               layers.empty() ? "the model has no mixt::Linear layers" : "the model's linear layers: " + names);
  }
  std::vector<LinearLayer> targets;
  for (const LinearLayer& layer : layers) {
    if (std::any_of(patterns.begin(), patterns.end(),
                    [&](const std::string& pattern) { return matches(layer.name, pattern); })) {
      targets.push_back(layer);
    }
  }
  return targets;
}

torch::nn::Module* owner_module(const LinearLayer& layer) { return dynamic_cast<torch::nn::Module*>(layer.owner); }

}  // namespace mixt
