#include "assembly/transformers_dir.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "recipe/recipe_node.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const Config& section, const fs::path& file) {
  std::ifstream in(file);
  if (!in)
    section.fail("from", "the checkpoint directory has no " + file.filename().string() + " (" + file.string() + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    section.fail("from", file.string() + " is not valid JSON: " + std::string(e.what()));
  }
}

// The JSON value as a recipe scalar: numbers and booleans as YAML writes them, strings bare.
std::string scalar_of(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// config.json's value at `key`; a dotted key ("rope_parameters.rope_theta") descends into
// objects. Null when absent.
const nlohmann::json* lookup(const nlohmann::json& config, const std::string& key) {
  const nlohmann::json* at = &config;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object()) return nullptr;
    const auto found = at->find(part);
    if (found == at->end() || found->is_null()) return nullptr;
    at = &*found;
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

bool agrees(const std::string& recipe_text, const nlohmann::json& value) {
  if (value.is_number()) {
    try {
      std::size_t used = 0;
      const double given = std::stod(recipe_text, &used);
      return used == recipe_text.size() && given == value.get<double>();
    } catch (const std::exception&) {
      return false;
    }
  }
  return recipe_text == scalar_of(value);
}

void check_implemented(const Config& section, const TransformersConfig& config, const nlohmann::json& json,
                       const fs::path& file, const std::string& model) {
  const auto type = json.find("model_type");
  const std::string model_type = type != json.end() && type->is_string() ? type->get<std::string>() : "";
  if (std::find(config.model_types.begin(), config.model_types.end(), model_type) == config.model_types.end()) {
    std::string known;
    for (const auto& t : config.model_types) known += (known.empty() ? "" : ", ") + t;
    section.fail("from", file.string() + " is a '" + model_type + "' checkpoint; model '" + model + "' reads " + known);
  }
  for (const auto& [key, expected] : config.implements) {
    const nlohmann::json* found = lookup(json, key);
    if (found == nullptr) continue;
    if (*found != nlohmann::json::parse(expected)) {
      section.fail("from", file.string() + " has " + key + ": " + found->dump() + "; model '" + model +
                               "' implements " + key + ": " + expected);
    }
  }
}

// The safetensors of the directory: model.safetensors, or every shard its index names.
WeightFiles open_weights(const Config& section, const fs::path& dir) {
  WeightFiles weights;
  const auto add = [&](const fs::path& file) {
    weights.files.emplace_back(file);
    const NamedTensors& layout = weights.files.back().layout();
    for (std::size_t i = 0; i < layout.size(); ++i) {
      weights.layout.push_back(layout[i]);
      weights.where.emplace_back(weights.files.size() - 1, i);
    }
  };
  const fs::path single = dir / "model.safetensors";
  if (fs::exists(single)) {
    add(single);
    return weights;
  }
  const fs::path index_file = dir / "model.safetensors.index.json";
  if (!fs::exists(index_file)) {
    section.fail("from", dir.string() + " holds neither model.safetensors nor model.safetensors.index.json",
                 "save the checkpoint with save_pretrained (safetensors, the default)");
  }
  const nlohmann::json index = read_json(section, index_file);
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    section.fail("from", index_file.string() + " has no weight_map");
  }
  std::vector<std::string> shards;  // in the order the index first names them
  std::set<std::string> listed;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    // get<std::string> would throw nlohmann's type_error, which no caller catches.
    if (!shard.is_string())
      section.fail("from", index_file.string() + " maps " + name + " to " + shard.dump() + ", not a file");
    if (listed.insert(shard.get<std::string>()).second) shards.push_back(shard.get<std::string>());
  }
  for (const std::string& shard : shards) {
    if (!fs::exists(dir / shard)) section.fail("from", index_file.string() + " names " + shard + ", which is missing");
    add(dir / shard);
  }
  std::set<std::string> names;
  for (const auto& item : weights.layout) names.insert(item.first);
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!names.count(name)) {
      section.fail("from", index_file.string() + " says " + name + " is in " + shard.get<std::string>() +
                               ", which does not hold it");
    }
  }
  return weights;
}

// Gives the model section's `option` the checkpoint's `value` (from `where`, said as `source`
// when the recipe's own value disagrees).
void fill_option(const Config& section, RecipeNode& node, const std::string& option, const nlohmann::json& value,
                 const std::string& where, const std::string& source) {
  if (const RecipeEntry* given = node.find(option)) {
    if (!agrees(given->value->scalar, value)) {
      section.fail(option, "model." + option + " is " + given->value->scalar + ", but " + source,
                   "leave model." + option + " out to take the checkpoint's");
    }
    return;
  }
  auto filled = std::make_shared<RecipeNode>();
  filled->type = RecipeNode::Type::scalar;
  filled->scalar = scalar_of(value);
  filled->quoted = value.is_string();
  filled->where = SourceLocation{where};
  node.entries.push_back({option, filled->where, filled});
}

// transformers' default for `key` when config.json omits it: a value of its own, or another
// key's value (itself present or defaulted). Null when the class has none mixt needs.
std::optional<nlohmann::json> default_of(const TransformersDefaults& defaults, const nlohmann::json& config,
                                         const std::string& key, int depth = 0) {
  for (const auto& [name, value] : defaults.values) {
    if (name == key) return nlohmann::json::parse(value);
  }
  for (const auto& [name, source] : defaults.copies) {
    if (name != key || depth > 4) continue;
    if (const nlohmann::json* found = lookup(config, source)) return *found;
    return default_of(defaults, config, source, depth + 1);
  }
  return std::nullopt;
}

// The options no key of config.json filled take what transformers' config class takes for
// the omitted keys, not the model's own (a preset's) defaults.
void fill_omitted(const Config& section, RecipeNode& node, const TransformersConfig& mapping,
                  const TransformersDefaults& defaults, const nlohmann::json& config, const std::string& file) {
  std::set<std::string> present;  // options some key of the file fills
  for (const auto& [key, option] : mapping.options) {
    if (lookup(config, key) != nullptr) present.insert(option);
  }
  std::set<std::string> done;
  for (const auto& [key, option] : mapping.options) {
    if (present.count(option) || done.count(option)) continue;
    const std::optional<nlohmann::json> value = default_of(defaults, config, key);
    if (!value) continue;
    done.insert(option);
    const std::string said = defaults.config_class + "'s default for " + key;
    fill_option(section, node, option, *value, file + " (no " + key + ": " + said + ")",
                file + " has no " + key + ", for which " + said + " is " + value->dump());
  }
}

}  // namespace

void apply_transformers_config(const Config& section, const ComponentEntry& model) {
  const fs::path dir = section.string("from");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    section.fail("from", "not a folder: " + dir.string(), "name the directory save_pretrained wrote");
  }
  if (!model.transformers) {
    section.fail("from", "model '" + model.name + "' does not read transformers checkpoints",
                 "name its weights with model.weights=FILE.safetensors");
  }
  if (section.has("weights")) {
    section.fail("weights", "give model.from or model.weights, not both", "model.from takes the directory's weights");
  }
  const fs::path config_file = dir / "config.json";
  const nlohmann::json config = read_json(section, config_file);
  check_implemented(section, *model.transformers, config, config_file, model.name);
  RecipeNode& node = ConfigTree::node(section);
  for (const auto& [key, option] : model.transformers->options) {
    const nlohmann::json* found = lookup(config, key);
    if (found == nullptr) continue;
    fill_option(section, node, option, *found, config_file.string() + ", key " + key,
                config_file.string() + " has " + key + ": " + found->dump());
  }
  if (model.transformers_defaults) {
    fill_omitted(section, node, *model.transformers, *model.transformers_defaults, config, config_file.string());
  }
}

LoadReport WeightFiles::load_into(torch::nn::Module& module, bool strict, const std::string& source) const {
  return load_state_dict(
      module, layout,
      [&](std::size_t i, const at::Tensor& target) { files[where[i].first].read_into(where[i].second, target); },
      strict, source);
}

WeightFiles apply_transformers_dir(const Config& section, const ComponentEntry& model) {
  apply_transformers_config(section, model);
  return open_weights(section, section.string("from"));
}

std::string transformers_dir_tokenizer(const fs::path& dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    if (fs::exists(dir / name)) return (dir / name).string();
  }
  return "";
}

std::string transformers_dir_task(const fs::path& dir) {
  std::ifstream in(dir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto architectures = config.is_object() ? config.find("architectures") : config.end();
  // Unreadable or unnamed: causal_lm still, so that the model's reading of the folder says
  // what is wrong with it (only language models read transformers folders so far).
  if (!config.is_object() || architectures == config.end() || !architectures->is_array() || architectures->empty()) {
    return "causal_lm";
  }
  for (const auto& name : *architectures) {
    const std::string text = name.is_string() ? name.get<std::string>() : "";
    if (text.ends_with("ForCausalLM") || text.ends_with("LMHeadModel")) return "causal_lm";
  }
  return "";
}

void give_model_tokenizer(const Config& data_section, const ComponentEntry& dataset, const std::string& tokenizer) {
  if (tokenizer.empty() || data_section.has("tokenizer")) return;
  const auto& docs = dataset.info.options;
  if (std::none_of(docs.begin(), docs.end(), [](const OptionDoc& doc) { return doc.name == "tokenizer"; })) return;
  auto value = std::make_shared<RecipeNode>();
  value->type = RecipeNode::Type::scalar;
  value->scalar = tokenizer;
  value->quoted = true;
  value->where = SourceLocation{"model.from's tokenizer (" + tokenizer + ")"};
  ConfigTree::node(data_section).entries.push_back({"tokenizer", value->where, value});
}

}  // namespace mixt
