// Fuzz target: a recipe's YAML (parse_yaml) and command-line overrides (apply_override).
// Input: the YAML text, then after a NUL one override per line ("key.path=value"). What
// must hold:
//   - parsing and each override succeed or fail with a mixt::Error (nothing else escapes);
//   - a recipe (a map) written back (to_yaml, what a run directory keeps) parses again, and
//     writing that gives the same text: a run's recipe.yaml reruns as it ran.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "mixt/error.h"
#include "recipe/recipe_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string yaml(input.substr(0, split));
  mixt::RecipeNodePtr root;
  try {
    root = mixt::parse_yaml(yaml, "fuzz.yaml");
    if (split != std::string_view::npos) {
      std::string_view overrides = input.substr(split + 1);
      for (int applied = 0; !overrides.empty() && applied < 16; ++applied) {
        const std::size_t end = overrides.find('\n');
        mixt::apply_override(*root, std::string(overrides.substr(0, end)));
        overrides = end == std::string_view::npos ? std::string_view() : overrides.substr(end + 1);
      }
    }
  } catch (const mixt::Error&) {
    return 0;
  }
  if (!root->is_map()) return 0;  // load_recipe refuses anything else ("a recipe must be a map")
  const std::string written = mixt::to_yaml(*root);
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
  return 0;
}
