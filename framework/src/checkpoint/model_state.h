// The model's part of a checkpoint. A run with an adapter trains a few parameters of a
// frozen model: its checkpoints hold those and the buffers, not the frozen base (gigabytes
// a checkpoint for what the recipe's model.from or model.weights gives back), as PEFT's and
// torchtune's LoRA checkpoints do. Without an adapter, every parameter and buffer
// (Module::save's archive).
#pragma once

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <string>

#include "mixt/helpers/state_dict.h"

namespace mixt {

// Module::save's nested archive; with `omit_frozen`, without the parameters that do not
// require a gradient, and marked so that readers know the base comes from the recipe.
void save_model_state(const torch::nn::Module& model, bool omit_frozen, torch::serialize::OutputArchive& archive);

// Whether a model archive was saved with `omit_frozen`.
bool omits_frozen_base(torch::serialize::InputArchive& model_archive);

// How `saved` (a checkpoint's model tensors) fits `model`; with `frozen_base_omitted`, the
// model's frozen parameters (built from the recipe's base) are not missing.
LoadReport checkpoint_fit(const torch::nn::Module& model, const NamedTensors& saved, bool frozen_base_omitted);

}  // namespace mixt
