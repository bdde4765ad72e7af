// What is known about a run besides its built parts (assembly/components.h): each fact
// worked out once, where it is found, and handed next to the Components to whatever needs
// it (the Trainer and its collaborators, Inference, the commands); nothing recomputes them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mixt/error.h"

namespace mixt {

// One component a recipe built, and the plugin that built it.
struct ComponentRecord {
  std::string kind;
  std::string name;
  std::string plugin;
  std::string plugin_version;
  std::string file;
};

// Where the recipe lists submodules by name: a model that never routes one is a recipe
// error, which may only show after the first training step, long after the recipe was read
// (check_listed_submodules_routed in assembly/components.h).
struct ListedSubmodulesWhere {
  SourceLocation fp32_modules;              // precision.fp32_modules
  SourceLocation activation_checkpointing;  // trainer.activation_checkpointing
};

struct RunFacts {
  // From the recipe, before anything is built (prepare_experiment).
  std::string name;              // the recipe's name:, else its file's stem: <output>/<name>/
  std::filesystem::path output;  // the recipe's output:, where run directories go
  // trainer.device, resolved (a torchrun rank's GPU): where every component is built and
  // every batch goes.
  at::Device device = at::kCPU;
  // data.train's keys that decide an epoch's order ("shuffle=false, ..."), as the recipe
  // spells them: part of what a mid-epoch checkpoint's position means.
  std::string data_order;

  // What building finds (build_components).
  std::vector<ComponentRecord> records;  // what built what, for run directories and checkpoints
  // trainer.channels_last: the model's 4-D parameters and buffers are NHWC, and so is what
  // it is fed (assembly/model_input.h).
  bool channels_last = false;
  std::int64_t batches_per_epoch = 0;  // data.train's (on this rank)
  // Optimizer steps per epoch under the recipe's trainer options (the batches,
  // trainer.accumulate, trainer.max_steps_per_epoch): the scheduler's count, and `mixt check`'s.
  std::int64_t steps_per_epoch = 0;
  // The optimizer's parameters() by name, in its order, when it is whole and they are the
  // tensors it was given: how a sharded checkpoint's optimizer state maps onto it.
  std::vector<std::string> optimizer_names;
  // What the policy costs on this device when it computes in a type the device only
  // emulates (assembly/speed_notes.h), warned at start-up; empty when nothing to say.
  std::string speed_note;
  ListedSubmodulesWhere where_listed;
};

}  // namespace mixt
