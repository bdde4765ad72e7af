#include "metadata.h"

#include <stdexcept>

namespace {

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) {
    throw std::runtime_error(std::string("the file's mixt.json has no \"") + key +
                             "\": was it written by mixt export --format torchscript?");
  }
  return *it;
}

std::string text_or_empty(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

ModelMetadata parse_metadata(const std::string& text) {
  if (text.empty()) {
    throw std::runtime_error("the file carries no mixt.json: export it with mixt export -o model.pt");
  }
  const nlohmann::json all = nlohmann::json::parse(text);
  ModelMetadata out;
  out.classes = field(all, "mixt.classes").get<std::vector<std::string>>();
  // ["batch", 3, 224, 224]: the first entry is the symbolic batch.
  const nlohmann::json& shape = field(field(all, "mixt.input"), "shape");
  for (std::size_t i = 1; i < shape.size(); ++i) out.sample_shape.push_back(shape[i].get<std::int64_t>());
  const nlohmann::json& preprocessing = field(all, "mixt.preprocessing");
  out.transforms = field(preprocessing, "transforms");
  const auto section = preprocessing.find("data_section");
  if (section != preprocessing.end() && section->is_string()) out.data_section = section->get<std::string>();
  out.recipe = text_or_empty(all, "mixt.recipe");
  out.source = text_or_empty(all, "mixt.source");
  out.version = text_or_empty(all, "mixt.version");
  return out;
}
