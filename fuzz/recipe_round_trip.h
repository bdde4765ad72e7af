// The property every target that fills a recipe checks: the tree written back as a run's
// recipe.yaml (to_yaml) parses again and writes the same text, so a run reruns as it ran.
#pragma once

#include <cstdio>
#include <string>

#include "fuzz_check.h"
#include "mixt/error.h"
#include "recipe/recipe_loader.h"

inline void check_recipe_round_trip(const mixt::RecipeNode& root) {
  const std::string written = mixt::to_yaml(root);
  mixt::RecipeNodePtr again;
  try {
    again = mixt::parse_yaml(written, "recipe.yaml");
  } catch (const mixt::Error& e) {
    std::fprintf(stderr, "%s\n---\n%s\n", e.what(), written.c_str());
    MIXT_FUZZ_CHECK(false, "the recipe mixt wrote back does not parse");
  }
  const std::string rewritten = mixt::to_yaml(*again);
  if (rewritten != written)
    std::fprintf(stderr, "written:\n%s---\nrewritten:\n%s---\n", written.c_str(), rewritten.c_str());
  MIXT_FUZZ_CHECK(rewritten == written, "the recipe written back changes when read and written again");
}
