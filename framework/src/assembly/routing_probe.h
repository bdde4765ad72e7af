// What a model routes through mixt::call_submodule / mixt::call_block, found by running it
// once on a blank batch: the names `precision.fp32_modules` and
// `trainer.activation_checkpointing` can take, for `mixt check` and for the hints of errors
// that name a submodule the model does not route.
#pragma once

#include <string>
#include <vector>

#include "assembly/components.h"
#include "assembly/run_facts.h"

namespace mixt {

struct Routing {
  std::vector<std::string> routed;  // every routed name, in the order of the first forward
  std::vector<std::string> blocks;  // those routed with call_block: what `activation_checkpointing: all` recomputes
};

// One forward pass on a blank batch of the training data's shape, in evaluation mode and
// without gradients, so nothing of the model changes. `blocks` is only filled when
// `with_blocks`: finding them sets the model's activation checkpointing to `all` for the
// pass and back to `choice` afterwards, which forgets what was routed so far (harmless
// before training; a run checks its listed names again after its first step). Empty when
// the training data cannot say its sample shape.
Routing probe_routing(const Components& components, const RunFacts& facts, bool with_blocks = false,
                      const ActivationCheckpointing& choice = {});

// The hint for a listed name the model does not route: the closest routed name, and the list.
std::string routed_names_hint(const std::string& name, const std::vector<std::string>& routed);

}  // namespace mixt
