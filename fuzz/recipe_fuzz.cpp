// Fuzz target: a recipe's YAML (parse_yaml) and command-line overrides (apply_override).
// Input: the YAML text, then after a NUL one override per line ("key.path=value"). What
// must hold:
//   - parsing and each override succeed or fail with a mixt::Error (nothing else escapes);
//   - a recipe (a map) written back (to_yaml, what a run directory keeps) parses again, and
//     writing that gives the same text: a run's recipe.yaml reruns as it ran.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mixt/error.h"
#include "recipe/recipe_loader.h"
#include "recipe_round_trip.h"

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
  check_recipe_round_trip(*root);
  return 0;
}
