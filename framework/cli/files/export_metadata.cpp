#include "files/export_metadata.h"

#include <nlohmann/json.hpp>

#include "mixt/version.h"
#include "recipe/recipe_node.h"

namespace mixt::cli {

namespace {

// A recipe node as JSON: maps, lists, numbers and booleans as such, other scalars as strings.
nlohmann::json to_json(const RecipeNode& node) {
  switch (node.type) {
    case RecipeNode::Type::null:
      return nullptr;
    case RecipeNode::Type::map: {
      nlohmann::json out = nlohmann::json::object();
      for (const RecipeEntry& entry : node.entries) out[entry.key] = to_json(*entry.value);
      return out;
    }
    case RecipeNode::Type::sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const RecipeNodePtr& item : node.items) out.push_back(to_json(*item));
      return out;
    }
    case RecipeNode::Type::scalar:
      break;
  }
  if (!node.quoted) {
    if (node.scalar == "true" || node.scalar == "false") return node.scalar == "true";
    try {
      std::size_t used = 0;
      const double number = std::stod(node.scalar, &used);
      if (used == node.scalar.size()) return number;
    } catch (const std::exception&) {
    }
  }
  return node.scalar;
}

// The transforms of data.<split>, as the recipe states them (a preset name or a list).
nlohmann::json transforms_of(const Recipe& recipe, const std::string& split) {
  if (split.empty()) return nullptr;
  const RecipeEntry* data = recipe.root->find("data");
  if (!data || !data->value->is_map()) return nullptr;
  const RecipeEntry* section = data->value->find(split);
  if (!section || !section->value->is_map()) return nullptr;
  const RecipeEntry* transforms = section->value->find("transforms");
  return transforms ? to_json(*transforms->value) : nlohmann::json("the dataset's evaluation default");
}

}  // namespace

std::map<std::string, std::string> export_metadata(const Recipe& recipe, const ExportFacts& facts) {
  // Sizes, with "batch" and the task's open axes by name: ["batch", 1, 28, 28]; ["batch", "time"].
  nlohmann::json input_shape = nlohmann::json::array({"batch"});
  for (std::int64_t d : facts.sample_shape) input_shape.push_back(d);
  nlohmann::json output_shape = nlohmann::json::array({"batch"});
  for (std::size_t i = 1; i < facts.output_shape.size(); ++i) output_shape.push_back(facts.output_shape[i]);
  nlohmann::json input = {{"name", "input"}, {"dtype", facts.integer_input ? "int64" : facts.dtype}};
  for (const OpenAxis& open : facts.exported.open_axes) {
    if (facts.integer_input) {  // an image model takes larger images than the traced ones
      input["max_" + open.name] = facts.model_context > 0 ? nlohmann::json(facts.model_context)
                                                          : input_shape.at(static_cast<std::size_t>(open.input_dim));
    }
    input_shape.at(static_cast<std::size_t>(open.input_dim)) = open.name;
    if (static_cast<std::size_t>(open.output_dim) < output_shape.size()) {
      output_shape.at(static_cast<std::size_t>(open.output_dim)) = open.name;
    }
  }
  input["shape"] = input_shape;
  if (!facts.exported.input_meaning.empty()) input["meaning"] = facts.exported.input_meaning;
  const nlohmann::json output = {
      {"name", "output"}, {"dtype", facts.dtype}, {"shape", output_shape}, {"meaning", facts.exported.output_meaning}};
  const RecipeEntry* name = recipe.root->find("name");
  const nlohmann::json preprocessing = {
      {"transforms", transforms_of(recipe, facts.data_split)},
      // In words, from the dataset itself: what `transforms` does, or its default when the
      // recipe states none (values included: sizes, mean, std).
      {"described",
       facts.dataset_preprocessing.empty() ? nlohmann::json(nullptr) : nlohmann::json(facts.dataset_preprocessing)},
      {"data_section", facts.data_split.empty() ? nlohmann::json(nullptr) : nlohmann::json("data." + facts.data_split)},
      {"channel_order",
       facts.sample_shape.size() == 3 && facts.sample_shape[0] == 3 ? "RGB" : "as the dataset decodes"},
      {"layout", !facts.exported.input_layout.empty()
                     ? facts.exported.input_layout
                     : "NCHW float32 (ONNX); channels_last: " + std::string(facts.channels_last ? "true" : "false") +
                           " in the recipe, which only changes memory layout in LibTorch"}};
  std::map<std::string, std::string> out{
      {"mixt.version", version()},
      {"mixt.recipe", name && name->value->type == RecipeNode::Type::scalar ? name->value->scalar : ""},
      {"mixt.source", facts.source},
      {"mixt.format", facts.format + (facts.format == "onnx" ? " opset " + std::to_string(facts.opset) : "")},
      {"mixt.classes", nlohmann::json(facts.class_names).dump()},
      {"mixt.input", input.dump()},
      {"mixt.output", output.dump()},
      {"mixt.preprocessing", preprocessing.dump()},
  };
  return out;
}

std::string export_metadata_json(const std::map<std::string, std::string>& metadata) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : metadata) {
    const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    out[key] = parsed.is_discarded() || !(parsed.is_object() || parsed.is_array()) ? nlohmann::json(value) : parsed;
  }
  return out.dump(2);
}

}  // namespace mixt::cli
