// Fuzz target: a transformers checkpoint folder's JSON (model.from): config.json filling a
// model's options (apply_transformers_config, with llama's own mapping and LlamaConfig's
// defaults: models/llama/transformers_mapping.cpp), the task it implies
// (transformers_dir_task), and model.safetensors.index.json (apply_transformers_dir, which
// lists the shards; none is there, so it ends at the first it looks for).
// Input: config.json, then after a NUL the index. What must hold:
//   - each reader accepts or refuses with a mixt::Error; nothing else escapes;
//   - the task is causal_lm or none;
//   - a model section filled from config.json, written as a run's recipe.yaml (to_yaml),
//     reads again and writes the same text.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "assembly/transformers_dir.h"
#include "fuzz_check.h"
#include "llama/transformers_mapping.h"
#include "mixt/error.h"
#include "recipe/recipe_loader.h"
#include "recipe_round_trip.h"
#include "scratch_file.h"

namespace {

mixt::ComponentEntry llama() {
  mixt::ComponentEntry entry;
  entry.kind = mixt::ComponentKind::model;
  entry.name = "llama";
  entry.transformers = mixt::models::llama::transformers_config();
  entry.transformers_defaults = mixt::models::llama::transformers_defaults();
  return entry;
}

void write(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const mixt::ComponentEntry model = llama();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const ScratchFile dir("transformers");
  std::filesystem::create_directories(dir.path);
  write(dir.path / "config.json", input.substr(0, split));
  if (split != std::string_view::npos) write(dir.path / "model.safetensors.index.json", input.substr(split + 1));

  const std::string task = mixt::transformers_dir_task(dir.path);
  MIXT_FUZZ_CHECK(task == "causal_lm" || task.empty(), "a task other than causal_lm or none");
  // A recipe's own option, which config.json must agree with.
  const std::string yaml = "model: {name: llama, from: '" + dir.path.string() + "', num_layers: 2}\n";
  mixt::RecipeNodePtr root = mixt::parse_yaml(yaml, "fuzz.yaml");
  const mixt::Config section = mixt::Config(root, "").section("model");
  try {
    mixt::apply_transformers_config(section, model);
  } catch (const mixt::Error&) {
    return 0;
  }
  check_recipe_round_trip(*root);
  try {
    (void)mixt::apply_transformers_dir(mixt::Config(mixt::parse_yaml(yaml, "fuzz.yaml"), "").section("model"), model);
  } catch (const mixt::Error&) {
  }
  return 0;
}
