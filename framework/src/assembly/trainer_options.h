// The `trainer:` section of a recipe.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/options.h"
#include "mixt/config.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/plugin.h"

namespace mixt {

// Each field's initialiser is its key's default; what the keys mean is declared once, with
// the key (trainer_options.cpp), for `mixt describe trainer` and docs/recipes.md.
struct TrainerOptions {
  std::int64_t epochs = 1;
  std::string device = "auto";
  std::uint64_t seed = 0;
  std::int64_t threads = 0;
  std::int64_t log_every = 50;
  std::int64_t accumulate = 1;
  double clip_grad_norm = 0.0;
  std::string grad_norm = "logged";
  std::int64_t max_steps_per_epoch = 0;
  std::int64_t keep_checkpoints = 2;
  std::string resume;
  bool channels_last = false;
  bool cudnn_benchmark = false;
  bool stop_on_nonfinite_loss = true;
  ActivationCheckpointing activation_checkpointing;
  distributed::DistributedOptions distributed;  // trainer.distributed (used under torchrun)

  static TrainerOptions read(const Config& section);

  // Optimizer steps in an epoch of `batches` micro-batches: `accumulate` per step (the last
  // step may take fewer), at most max_steps_per_epoch. What a schedule's steps_per_epoch is.
  std::int64_t steps_per_epoch(std::int64_t batches) const {
    const std::int64_t steps = (batches + accumulate - 1) / accumulate;
    return max_steps_per_epoch > 0 ? std::min(steps, max_steps_per_epoch) : steps;
  }
};

// Every key of `trainer:` with its default and meaning, for `mixt describe trainer`; the
// keys of `trainer.distributed:` as distributed.<key>. A test holds this, what read()
// reads and the table of docs/recipes.md to the same keys.
std::vector<OptionDoc> trainer_option_docs();

// "auto" picks CUDA when a GPU is usable, else the CPU. Errors name the recipe key.
at::Device resolve_device(const std::string& text, const Config& section);

}  // namespace mixt
