#include "mixt/helpers/linear.h"

#include <algorithm>

namespace mixt {

LinearFunction::~LinearFunction() = default;
LinearMaps::~LinearMaps() = default;

void LinearMaps::set_linear_function(std::string_view name, std::shared_ptr<LinearFunction> function) {
  const auto found =
      std::find_if(functions_.begin(), functions_.end(), [&](const auto& entry) { return entry.first == name; });
  if (found != functions_.end()) {
    found->second = std::move(function);
  } else if (function) {
    functions_.emplace_back(std::string(name), std::move(function));
  }
}

const std::shared_ptr<LinearFunction>& LinearMaps::linear_function(std::string_view name) const {
  static const std::shared_ptr<LinearFunction> none;
  for (const auto& entry : functions_) {
    if (entry.first == name) return entry.second;
  }
  return none;
}

at::Tensor LinearMaps::linear(std::string_view name, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const {
  for (const auto& entry : functions_) {
    if (entry.first == name && entry.second) return entry.second->forward(input, weight, bias);
  }
  return at::linear(input, weight, bias);
}

std::vector<LinearLayer> linear_layers(torch::nn::Module& model) {
  std::vector<LinearLayer> layers;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    auto* owner = dynamic_cast<LinearMaps*>(item.value().get());
    if (!owner) continue;
    for (LinearMaps::Map& map : owner->linear_maps()) {
      std::string name = item.key();
      if (!map.name.empty()) name += (name.empty() ? "" : ".") + map.name;
      layers.push_back({std::move(name), owner, std::move(map.name), std::move(map.weight), std::move(map.bias)});
    }
  }
  return layers;
}

}  // namespace mixt
