// The parsed recipe: a YAML tree in which every node remembers the file, line and column
// it came from (across base: files and command-line overrides), and every map remembers
// which of its keys a component asked for — the basis of the unknown-key check.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mixt/error.h"

namespace mixt {

struct RecipeNode;
using RecipeNodePtr = std::shared_ptr<RecipeNode>;

struct RecipeEntry {
  std::string key;
  SourceLocation key_where;
  RecipeNodePtr value;
};

// A default a reader fell back on, as it was given to the Config getter.
using FallbackValue = std::variant<double, std::int64_t, bool, std::string, std::vector<double>,
                                   std::vector<std::int64_t>, std::vector<std::string>>;

struct RecipeNode {
  enum class Type { null, scalar, sequence, map };

  Type type = Type::null;
  std::string scalar;  // Type::scalar
  bool quoted = false;  // a quoted scalar is always a string
  std::vector<RecipeEntry> entries;    // Type::map, in file order
  std::vector<RecipeNodePtr> items;    // Type::sequence
  SourceLocation where;

  mutable std::set<std::string, std::less<>> known_keys;  // keys some reader asked for
  mutable bool opened = false;  // handed out as a Config section
  // Keys a reader asked for that were absent, with the default it used: lets a test hold
  // what `mixt describe` shows to what the component reads.
  mutable std::map<std::string, FallbackValue, std::less<>> fallbacks_used;

  bool is_map() const { return type == Type::map; }
  const RecipeEntry* find(std::string_view key) const;
  RecipeEntry* find(std::string_view key);
  void erase(std::string_view key);
  RecipeNodePtr deep_copy() const;
};

// Human words for a node's type, for error messages ("a map", "a list", "\"fast\"").
std::string describe_node(const RecipeNode& node);
// `text` in double quotes, cut to its first 80 characters (and its length) when longer.
std::string quote_value(const std::string& text);

}  // namespace mixt
