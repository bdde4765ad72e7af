#include "assembly/adapters.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "assembly/quantize_base.h"
#include "assembly/transformers_dir.h"
#include "common/atomic_file.h"
#include "mixt/options.h"
#include "recipe/recipe_node.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {
const Optional<std::string> kFrom{
    "from",
    "a PEFT adapter folder (save_pretrained's adapter_config.json and adapter_model.safetensors): its config fills "
    "the options the recipe leaves out, its tensors are the adapter's starting values; read by mixt"};

const char* const kPrefix = "base_model.model.";

// adapter_config.json key -> the option it fills (lora's; the option names are the SDK's
// documented ones for a PEFT LoRA).
const std::vector<std::pair<std::string, std::string>> kPeftKeys = {
    {"r", "rank"}, {"lora_alpha", "alpha"}, {"lora_dropout", "dropout"}, {"target_modules", "targets"}};

RecipeNodePtr node_of(const nlohmann::json& value, const std::string& where) {
  auto node = std::make_shared<RecipeNode>();
  node->where = SourceLocation{where};
  if (value.is_array()) {
    node->type = RecipeNode::Type::sequence;
    for (const auto& item : value) node->items.push_back(node_of(item, where));
  } else {
    node->type = RecipeNode::Type::scalar;
    node->scalar = value.is_string() ? value.get<std::string>() : value.dump();
    node->quoted = value.is_string();
  }
  return node;
}

// The recipe's value of a filled option as JSON, to compare with the file's.
bool agrees(const RecipeNode& given, const nlohmann::json& value) {
  if (value.is_array()) {
    if (given.type != RecipeNode::Type::sequence || given.items.size() != value.size()) return false;
    std::set<std::string> a, b;
    for (const auto& item : given.items) a.insert(item->scalar);
    for (const auto& item : value) b.insert(item.is_string() ? item.get<std::string>() : item.dump());
    return a == b;
  }
  if (value.is_number()) {
    try {
      return std::stod(given.scalar) == value.get<double>();
    } catch (const std::exception&) {
      return false;
    }
  }
  return given.scalar == (value.is_string() ? value.get<std::string>() : value.dump());
}

void fill(const Config& section, const std::string& option, const nlohmann::json& value, const std::string& where) {
  RecipeNode& node = ConfigTree::node(section);
  if (const RecipeEntry* given = node.find(option)) {
    if (!agrees(*given->value, value)) {
      section.fail(option, "adapter." + option + " disagrees with " + where + ": " + value.dump(),
                   "leave adapter." + option + " out to take the adapter folder's");
    }
    return;
  }
  RecipeNodePtr filled = node_of(value, where);
  node.entries.push_back({option, filled->where, filled});
}

nlohmann::json read_config(const Config& section, const fs::path& file) {
  std::ifstream in(file);
  if (!in) section.fail("from", "the adapter folder has no adapter_config.json (" + file.string() + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    section.fail("from", file.string() + " is not valid JSON: " + std::string(e.what()));
  }
}

// adapter_config.json into the section's options.
void fill_from_config(const Config& section, const fs::path& dir) {
  const fs::path file = dir / "adapter_config.json";
  const nlohmann::json config = read_config(section, file);
  const auto type = config.find("peft_type");
  if (type == config.end() || !type->is_string()) section.fail("from", file.string() + " has no peft_type");
  std::string name = type->get<std::string>();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto is_true = [&config](const char* key) {
    const auto found = config.find(key);
    return found != config.end() && found->is_boolean() && found->get<bool>();
  };
  // PEFT's DoRA is a LoRA config with use_dora: mixt's adapter `dora`.
  const bool dora = name == "lora" && is_true("use_dora");
  fill(section, "name", dora ? "dora" : name, file.string() + ", key " + (dora ? "use_dora" : "peft_type"));
  for (const char* unsupported : {"use_rslora", "fan_in_fan_out"}) {
    if (is_true(unsupported)) {
      section.fail("from", file.string() + " has " + std::string(unsupported) + ": true, which mixt's " +
                               (dora ? "dora" : "lora") + " does not implement");
    }
  }
  const auto targets = config.find("target_modules");
  if (targets != config.end() && targets->is_string()) {
    section.fail("from", file.string() + " gives target_modules as a regular expression",
                 "mixt reads target_modules as a list of names");
  }
  for (const auto& [key, option] : kPeftKeys) {
    const auto found = config.find(key);
    if (found == config.end() || found->is_null()) continue;
    fill(section, option, *found, file.string() + ", key " + key);
  }
}

// The adapter folder's tensors into the adapter's parameters: every one present with its
// shape, none left over.
void load_tensors(const Config& section, const fs::path& dir, torch::nn::Module& model) {
  const fs::path file = dir / "adapter_model.safetensors";
  if (!fs::exists(file))
    section.fail("from", "the adapter folder has no adapter_model.safetensors (" + file.string() + ")");
  std::map<std::string, at::Tensor> tensors;
  for (auto& [name, tensor] : load_safetensors(file).tensors) tensors[name] = tensor;
  at::NoGradGuard no_grad;
  for (auto& [name, parameter] : peft_tensors(model)) {
    const auto found = tensors.find(name);
    if (found == tensors.end()) {
      section.fail("from", file.string() + " has no " + name + ", which this model's adapter has",
                   "an adapter saved for this base model with these targets");
    }
    if (found->second.sizes() != parameter.sizes()) {
      section.fail("from",
                   file.string() + ": " + name + " is " + c10::str(found->second.sizes()) + ", this model's is " +
                       c10::str(parameter.sizes()),
                   "the adapter was saved for another base model (or another rank)");
    }
    parameter.copy_(found->second);
    tensors.erase(found);
  }
  if (!tensors.empty()) {
    section.fail("from",
                 file.string() + " holds " + tensors.begin()->first + ", which no adapted layer of this model has" +
                     (tensors.size() > 1 ? " (and " + std::to_string(tensors.size() - 1) + " more)" : ""),
                 "the adapter was saved for another base model");
  }
}
}  // namespace

const OptionDoc& adapter_from_doc() {
  static const OptionDoc doc = kFrom.doc();
  return doc;
}

std::string peft_name(const std::string& parameter) { return kPrefix + parameter; }

NamedTensors peft_tensors(torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) out.emplace_back(peft_name(item.key()), item.value());
  }
  return out;
}

std::unique_ptr<Adapter> apply_adapter(const Config& section, const Registry& registry, torch::nn::Module& model,
                                       const AdapterContext& context) {
  const std::optional<std::string> from = kFrom.read(section);
  if (from) {
    std::error_code ec;
    if (!fs::is_directory(*from, ec)) {
      section.fail("from", "not a folder: " + *from, "name the folder PEFT's save_pretrained wrote");
    }
    fill_from_config(section, *from);
  }
  for (auto& parameter : model.parameters()) parameter.requires_grad_(false);
  quantize_base(section, model);  // before the adapter, which wraps the NF4 layers' function
  std::unique_ptr<Adapter> adapter = registry.make_adapter(section, context);
  adapter->apply(model);
  if (peft_tensors(model).empty()) {
    section.fail("name", "the adapter added no trainable parameter to the model");
  }
  if (from) load_tensors(section, *from, model);
  return adapter;
}

void write_peft_adapter(const fs::path& dir, const Adapter& adapter, torch::nn::Module& model,
                        const std::string& base_model, const std::string& task_type) {
  fs::create_directories(dir);
  NamedTensors tensors;
  for (const auto& [name, tensor] : peft_tensors(model)) tensors.emplace_back(name, tensor.detach());
  save_safetensors(dir / "adapter_model.safetensors", tensors);
  nlohmann::json config = nlohmann::json::parse(adapter.peft_config());
  if (!config.contains("base_model_name_or_path")) {
    config["base_model_name_or_path"] = base_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model);
  }
  if (!config.contains("task_type")) {
    config["task_type"] = task_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(task_type);
  }
  const std::string text = config.dump(2) + "\n";
  write_file_atomically(dir / "adapter_config.json", [&](std::ostream& out) { out << text; });
}

}  // namespace mixt
