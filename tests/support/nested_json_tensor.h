// A tensor from nested JSON arrays as a golden script writes them (tensor.tolist()): the
// shape is the nesting's, the values read as float64 and converted to `type`.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

namespace mixt::testing {

inline at::Tensor nested_json_tensor(const nlohmann::json& nested, at::ScalarType type) {
  std::vector<double> values;
  std::vector<std::int64_t> shape;
  std::function<void(const nlohmann::json&, std::size_t)> walk = [&](const nlohmann::json& node, std::size_t depth) {
    if (!node.is_array()) {
      values.push_back(node.get<double>());
      return;
    }
    if (shape.size() == depth) shape.push_back(static_cast<std::int64_t>(node.size()));
    for (const auto& item : node) walk(item, depth + 1);
  };
  walk(nested, 0);
  return at::tensor(values, at::kDouble).view(shape).to(type);
}

}  // namespace mixt::testing
