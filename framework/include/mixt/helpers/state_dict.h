// mixt/helpers/state_dict.h — a module's parameters and buffers by name, as PyTorch's state_dict.
//
// Names are dotted paths ("layer1.0.conv1.weight", "bn1.running_mean"), in PyTorch's order
// (each module's own parameters, then its buffers, then its children). Together with
// mixt/helpers/safetensors.h this is how weights move between mixt and Python.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

#include "mixt/helpers/safetensors.h"

namespace mixt {

// The parameters and buffers of `module` (the tensors themselves, not copies).
NamedTensors state_dict(const torch::nn::Module& module);

// What load_state_dict did.
struct LoadReport {
  std::size_t loaded = 0;
  std::vector<std::string> missing;     // in the module, not in the tensors
  std::vector<std::string> unexpected;  // in the tensors, not in the module
  std::vector<std::string> mismatched;  // "name: file [..] vs model [..]"
  bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // One line per problem category, for an error or a warning.
  std::string describe() const;
};

// Copies the tensors whose name and shape match into `module` (converting the dtype if
// needed; layout and device of the module are kept). With `strict`, any missing,
// unexpected or mismatched name is a mixt::Error (kind recipe) listing them, and nothing
// is loaded. `source` names the tensors' origin in messages (a file path).
LoadReport load_state_dict(torch::nn::Module& module, const NamedTensors& tensors, bool strict,
                           const std::string& source);

// Since ABI 6.10. The same from tensors read one at a time: `layout` names each and gives its
// shape (a meta tensor will do: SafetensorsReader::layout), and `copy_into(i, target)` writes
// the i-th into the module's tensor `target` (SafetensorsReader::read_into), so that the
// tensors are never all in memory beside the module.
LoadReport load_state_dict(torch::nn::Module& module, const NamedTensors& layout,
                           const std::function<void(std::size_t, const at::Tensor&)>& copy_into, bool strict,
                           const std::string& source);

}  // namespace mixt
