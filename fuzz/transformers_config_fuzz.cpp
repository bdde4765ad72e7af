// Fuzz target: a transformers checkpoint folder's JSON (model.from): config.json filling a
// model's options (apply_transformers_config, with llama's mapping and LlamaConfig's
// defaults, copied below from models/llama/llama.cpp), the task it implies
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
#include "mixt/error.h"
#include "recipe/recipe_loader.h"
#include "scratch_file.h"

namespace {

mixt::ComponentEntry llama() {
  mixt::ComponentEntry entry;
  entry.kind = mixt::ComponentKind::model;
  entry.name = "llama";
  mixt::TransformersConfig config;
  config.model_types = {"llama"};
  config.options = {{"vocab_size", "vocab_size"},
                    {"max_position_embeddings", "context_length"},
                    {"num_hidden_layers", "num_layers"},
                    {"num_attention_heads", "num_heads"},
                    {"num_key_value_heads", "num_kv_heads"},
                    {"hidden_size", "hidden_dim"},
                    {"intermediate_size", "mlp_dim"},
                    {"head_dim", "head_dim"},
                    {"rms_norm_eps", "rms_norm_eps"},
                    {"tie_word_embeddings", "tie_embeddings"},
                    {"rope_theta", "rope_theta"},
                    {"rope_parameters.rope_theta", "rope_theta"},
                    {"rope_scaling.rope_type", "rope_type"},
                    {"rope_scaling.type", "rope_type"},
                    {"rope_parameters.rope_type", "rope_type"},
                    {"rope_scaling.factor", "rope_factor"}};
  config.implements = {{"hidden_act", "\"silu\""}, {"pretraining_tp", "1"}};
  entry.transformers = config;
  mixt::TransformersDefaults defaults;
  defaults.config_class = "LlamaConfig";
  defaults.values = {{"vocab_size", "32000"},
                     {"num_hidden_layers", "32"},
                     {"hidden_size", "4096"},
                     {"rms_norm_eps", "1e-06"},
                     {"tie_word_embeddings", "false"},
                     {"rope_theta", "10000.0"},
                     {"rope_scaling.rope_type", "\"default\""}};
  defaults.copies = {{"num_key_value_heads", "num_attention_heads"}};
  entry.transformers_defaults = defaults;
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
  const std::string written = mixt::to_yaml(*root);
  mixt::RecipeNodePtr again;
  try {
    again = mixt::parse_yaml(written, "recipe.yaml");
  } catch (const mixt::Error& e) {
    std::fprintf(stderr, "%s\n---\n%s\n", e.what(), written.c_str());
    MIXT_FUZZ_CHECK(false, "the recipe filled from config.json does not parse written back");
  }
  MIXT_FUZZ_CHECK(mixt::to_yaml(*again) == written, "the filled recipe changes read and written again");
  try {
    (void)mixt::apply_transformers_dir(mixt::Config(mixt::parse_yaml(yaml, "fuzz.yaml"), "").section("model"), model);
  } catch (const mixt::Error&) {
  }
  return 0;
}
