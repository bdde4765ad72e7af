// `mixt export --format transformers -o DIR`: a model as transformers' save_pretrained lays it
// out, DIR/model.safetensors and DIR/config.json, for LlamaForCausalLM.from_pretrained(DIR)
// (and for `model.from: DIR`). A run with an adapter is written merged into its base weights
// (mixt::MergesIntoBase): PEFT's merge_and_unload() and save_pretrained.
#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <set>
#include <string>

#include "mixt/helpers/safetensors.h"

namespace mixt::cli {

// The model's state for a file: on the CPU, contiguous, float32 where it was a 16-bit float;
// without the adapter's parameters (those requiring a gradient) when `adapter` is true.
NamedTensors exported_state(torch::nn::Module& model, bool adapter);

// The names of the adapter's parameters (those requiring a gradient), which a merged export
// leaves out.
std::set<std::string> adapter_parameter_names(const torch::nn::Module& model);

// Refuses (a usage error) an output that is neither absent nor an empty folder: nothing of an
// earlier export is overwritten or mixed in.
void check_transformers_output(const std::filesystem::path& output);

// Writes DIR/model.safetensors with `tensors` and copies config.json (and generation_config.json
// and the tokenizer's files, when present) from `from`, the transformers folder the recipe's
// model.from names. The folder is written beside DIR and renamed into place: a failure leaves
// nothing behind.
void write_transformers_folder(const std::filesystem::path& output, const NamedTensors& tensors,
                               const std::filesystem::path& from);

}  // namespace mixt::cli
