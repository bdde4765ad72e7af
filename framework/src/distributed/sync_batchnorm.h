// trainer.distributed.sync_batchnorm: attaches the run's communicator to the model's
// mixt::BatchNorm layers (mixt/helpers/batch_norm.h).
#pragma once

#include <torch/nn/module.h>

#include <string>

#include "mixt/config.h"
#include "mixt/distributed.h"

namespace mixt {

// Attaches `communicator` (null in a single process: nothing to synchronise) to every
// mixt::BatchNorm1d/2d/3d of `model` and returns how many there are. A torch::nn batch-norm
// layer cannot synchronise: any is a recipe error (at `distributed`'s sync_batchnorm key)
// naming them. A model with no batch norm at all gets a warning through `warn`.
std::size_t synchronise_batch_norm(torch::nn::Module& model, const Communicator* communicator,
                                   const Config& distributed_section,
                                   const std::function<void(const std::string&)>& warn);

}  // namespace mixt
