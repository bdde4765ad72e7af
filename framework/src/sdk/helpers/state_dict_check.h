// Comparing a module with named tensors without loading them (libmixt-internal: the SDK's
// mixt/helpers/state_dict.h loads). Resuming uses it before Module::load, which would replace a
// parameter by a saved tensor of any shape (Tensor::set_) and so silently turn a model
// changed since the checkpoint into the saved one.
#pragma once

#include <torch/nn/module.h>

#include "mixt/helpers/state_dict.h"

namespace mixt {

// What load_state_dict would report: names missing or unexpected, shapes that differ.
LoadReport compare_state_dict(const torch::nn::Module& module, const NamedTensors& tensors);

}  // namespace mixt
