// The recipe's `adapter:` section (mixt/adapter.h): a PEFT adapter folder read when it names
// one (`from: DIR`), the model frozen, the adapter applied and its PEFT files written.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "mixt/adapter.h"
#include "mixt/config.h"
#include "mixt/helpers/safetensors.h"
#include "plugins/registry.h"

namespace mixt {

// PEFT's name of a model parameter in adapter_model.safetensors ("base_model.model." + name).
std::string peft_name(const std::string& parameter);

// Fills the section's options from DIR/adapter_config.json when it has `from: DIR` (the
// recipe's own must agree), freezes every parameter of `model`, builds the adapter the
// section names and applies it, then loads DIR/adapter_model.safetensors into its
// parameters. Recipe errors at the section: a folder or file missing or unreadable, a tensor
// missing, of another shape, or one the adapter does not have (an adapter of another base).
std::unique_ptr<Adapter> apply_adapter(const Config& section, const Registry& registry, torch::nn::Module& model,
                                       const AdapterContext& context);

// The adapter's parameters (the model's trainable ones), by PEFT's names.
NamedTensors peft_tensors(torch::nn::Module& model);

// Writes DIR/adapter_model.safetensors and DIR/adapter_config.json (the adapter's
// peft_config() with base_model_name_or_path and task_type added when absent).
void write_peft_adapter(const std::filesystem::path& dir, const Adapter& adapter, torch::nn::Module& model,
                        const std::string& base_model, const std::string& task_type);

// The `from` option of an adapter section (read by mixt), for `mixt describe`.
const OptionDoc& adapter_from_doc();

}  // namespace mixt
