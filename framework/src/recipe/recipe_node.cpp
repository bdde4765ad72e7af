#include "recipe/recipe_node.h"

#include <algorithm>
#include <utility>

namespace mixt {

const RecipeEntry* RecipeNode::find(std::string_view key) const {
  for (const auto& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

RecipeEntry* RecipeNode::find(std::string_view key) {
  return const_cast<RecipeEntry*>(std::as_const(*this).find(key));
}

void RecipeNode::erase(std::string_view key) {
  std::erase_if(entries, [&](const RecipeEntry& entry) { return entry.key == key; });
}

RecipeNodePtr RecipeNode::deep_copy() const {
  auto copy = std::make_shared<RecipeNode>();
  copy->type = type;
  copy->scalar = scalar;
  copy->quoted = quoted;
  copy->where = where;
  for (const auto& entry : entries) {
    copy->entries.push_back({entry.key, entry.key_where, entry.value->deep_copy()});
  }
  for (const auto& item : items) copy->items.push_back(item->deep_copy());
  return copy;
}

std::string describe_node(const RecipeNode& node) {
  switch (node.type) {
    case RecipeNode::Type::null: return "nothing";
    case RecipeNode::Type::map: return "a map";
    case RecipeNode::Type::sequence: return "a list";
    case RecipeNode::Type::scalar: break;
  }
  return quote_value(node.scalar);
}

std::string quote_value(const std::string& text) {
  // An error quotes what the recipe wrote; a 100 MB value must not come back whole.
  constexpr std::size_t kShown = 80;
  if (text.size() <= kShown) return "\"" + text + "\"";
  return "\"" + text.substr(0, kShown) + "...\" (" + std::to_string(text.size()) + " characters)";
}

}  // namespace mixt
