// What runs as a block that a model routes through mixt::call_block starts its forward:
// sharding: parameters (distributed/parameter_units.h) gathers the block's weights there.
// The seam is mixt::checkpoints_activations(), which every routed call enters before its
// forward, so models built against any SDK 6 header take part.
#pragma once

#include <torch/nn/module.h>

#include <string_view>

namespace mixt::routing {

class BlockGate {
 public:
  virtual ~BlockGate() = default;
  // Before the forward of `block` (not when a backward pass recomputes it).
  virtual void entering(std::string_view block) = 0;
};

// Installs `gate` for `model` (null removes it); the caller keeps it alive meanwhile.
void set_block_gate(const torch::nn::Module& model, BlockGate* gate);
// Calls the gate of `model`, if any (the common case has none, and takes no lock).
void enter_block(const torch::nn::Module& model, std::string_view block);

}  // namespace mixt::routing
