// model.from: DIR, a Hugging Face transformers checkpoint directory (save_pretrained's):
// config.json fills the model's options as its plugin's TransformersConfig maps them
// (mixt/plugin.h), the keys it omits as transformers' config class fills them (its
// TransformersDefaults), model.safetensors (or the shards model.safetensors.index.json lists)
// are its weights, tokenizer.json (or tokenizer.model) its tokenizer.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "mixt/config.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "plugins/registry.h"

namespace mixt {

// libmixt's access to the tree under a Config (config.h's friend).
struct ConfigTree {
  static RecipeNode& node(const Config& config) { return *config.node_; }
};

// A checkpoint directory's tensors (model.safetensors, or every shard its index names), read
// one at a time as they are loaded: a model's weights never sit whole beside the model.
struct WeightFiles {
  std::vector<SafetensorsReader> files;
  NamedTensors layout;                                     // every file's, in order (meta tensors)
  std::vector<std::pair<std::size_t, std::size_t>> where;  // each one's file and index in it
  LoadReport load_into(torch::nn::Module& module, bool strict, const std::string& source) const;
};

// Fills the model section's options from DIR/config.json (those the recipe gives must agree
// with it) and opens the directory's weights. Recipe errors at model.from, or at the option
// that disagrees, naming the file and its key.
WeightFiles apply_transformers_dir(const Config& model_section, const ComponentEntry& model);

// Its first half: the options from DIR/config.json, no weights read.
void apply_transformers_config(const Config& model_section, const ComponentEntry& model);

// The directory's tokenizer file, or "" when it has none.
std::string transformers_dir_tokenizer(const std::filesystem::path& dir);

// The task the directory's config.json implies: "causal_lm" for a causal language model (its
// architectures *ForCausalLM or *LMHeadModel, as transformers' Auto classes read them, or none
// named), "" for another architecture.
std::string transformers_dir_task(const std::filesystem::path& dir);

// A data section whose dataset takes a `tokenizer` option and names none is given `tokenizer`
// (model.from's): a fine-tune encodes its text as the checkpoint was trained.
void give_model_tokenizer(const Config& data_section, const ComponentEntry& dataset, const std::string& tokenizer);

}  // namespace mixt
