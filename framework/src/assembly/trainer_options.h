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

struct TrainerOptions {
  std::int64_t epochs = 1;
  std::string device = "auto";          // auto | cpu | cuda | cuda:N
  std::uint64_t seed = 0;
  std::int64_t threads = 0;             // intra-op threads; 0 keeps LibTorch's default
  std::int64_t log_every = 50;          // optimizer steps between metric lines
  std::int64_t accumulate = 1;          // micro-batches per optimizer step
  double clip_grad_norm = 0.0;          // 0 = no clipping
  std::string grad_norm = "logged";     // when StepEnd::grad_norm is computed: logged | every_step
  std::int64_t max_steps_per_epoch = 0; // 0 = the whole dataset
  std::int64_t keep_checkpoints = 2;    // per-epoch checkpoints kept (plus `last`)
  std::string resume;                   // checkpoint file or run directory
  double label_smoothing = 0.0;         // cross-entropy label smoothing (as torch.nn.CrossEntropyLoss)
  bool channels_last = false;           // NHWC memory format for 4-D parameters and inputs
  bool cudnn_benchmark = false;         // let cuDNN time and pick convolution algorithms
  bool stop_on_nonfinite_loss = true;   // an applied step with an inf/NaN loss ends the run (exit 1)
  ActivationCheckpointing activation_checkpointing;  // none (the default), all blocks, or named submodules
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
