// Recipes: YAML files with `base:` inheritance, `_delete_`, and command-line overrides,
// turned into one RecipeNode tree whose nodes remember where they were written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "mixt/config.h"
#include "recipe/recipe_node.h"

namespace mixt {

struct Recipe {
  RecipeNodePtr root;                // the resolved recipe
  std::filesystem::path file;        // the recipe given on the command line
  Config config() const { return Config(root, ""); }
};

// Loads `file` and its base chain (deep-merged, the child wins), then applies the
// overrides ("optimizer.lr=0.1", values parsed as YAML). Throws recipe errors with
// file:line:column.
Recipe load_recipe(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// Parses YAML text; `source` names it in locations and errors.
RecipeNodePtr parse_yaml(const std::string& text, const std::string& source);

// Sets one dotted key ("trainer.epochs=3"), creating maps on the way.
void apply_override(RecipeNode& root, const std::string& assignment);
// Whether a node came from a command-line override rather than from a recipe file.
bool from_command_line(const SourceLocation& where);

// After every component has read its options: the first key nobody asked for is an error
// naming its location and the closest known key.
void check_unknown_keys(const RecipeNode& root);
// The same for one top-level section only (`mixt predict` builds the model alone).
void check_unknown_keys(const RecipeNode& root, const std::string& section);

// The resolved recipe as YAML (written into each run directory).
std::string to_yaml(const RecipeNode& root);

}  // namespace mixt
