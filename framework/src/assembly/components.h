// Builds every component a recipe names, in dependency order: datasets (they tell the
// model its input shape and classes), the task (what the model's output must be), the
// model, the precision policy (which may cast or lay out the model), the optimizer over
// the model's parameters, the scheduler, the callbacks of `callbacks:`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "assembly/named_callback.h"
#include "assembly/run_facts.h"
#include "assembly/trainer_options.h"
#include "common/optimizer_shards.h"
#include "mixt/plugin.h"
#include "plugins/registry.h"

namespace mixt {

// The parts a recipe builds, and nothing else: what is known about the run besides them
// (its device, what built what, steps per epoch, ...) is in RunFacts (assembly/run_facts.h).
struct Components {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> val;  // may be null: no evaluation
  std::shared_ptr<Model> model;
  std::unique_ptr<PrecisionPolicy> precision;
  std::unique_ptr<Optimizer> optimizer;
  // The optimizer again when trainer.distributed.sharding splits its state over the ranks
  // (common/optimizer_shards.h); null otherwise.
  OptimizerShards* optimizer_shards = nullptr;
  std::unique_ptr<Scheduler> scheduler;  // may be null: constant learning rate
  std::unique_ptr<Task> task;            // the recipe's `task:`, classification when it names none
  std::vector<NamedCallback> callbacks;  // the recipe's `callbacks:`, in its order
  std::unique_ptr<Adapter> adapter;      // the recipe's `adapter:`, applied to the model; may be null
};

// Builds the model a `model:` section names and, when the section has `weights: FILE`
// (safetensors, named as the model's reference names them: torchvision, transformers), loads them: strictly unless
// `strict: false`, which loads what matches and warns about the rest.
std::shared_ptr<Model> build_model(const Config& section, const Registry& registry, const ModelContext& context);

// The recipe's `task:` section, or classification's when it names none.
Config task_section_of(const Config& recipe);

// A recipe listing fp32_modules (or submodules to recompute) for a model that never routes
// them through mixt::call_submodule would silently train in reduced precision (or keep
// every activation): a recipe error at the option. Called after a blank forward pass when
// the components are built (so `mixt check` finds it) and after the first training step (a
// model may route only in training). The error is at facts.where_listed.
void check_listed_submodules_routed(const Components& components, const RunFacts& facts);

// The options mixt itself reads from a component's section, whatever the plugin: a
// model's weights and strict, a precision policy's fp32_modules. `mixt describe` lists
// them with the plugin's own.
std::vector<OptionDoc> framework_option_docs(ComponentKind kind);

// Builds on `facts.device` (resolved by the caller: resolve_device, or a torchrun rank's GPU)
// and writes into `facts` what building finds: records, channels_last, batches and steps
// per epoch, the speed note, where_listed. `communicator` is null for a single process;
// otherwise datasets are built for its rank's shard and the precision policy gets it
// (PrecisionContext::communicator).
Components build_components(const Config& recipe, const Registry& registry, const TrainerOptions& options,
                            const Config& trainer_section, RunFacts& facts, const Communicator* communicator = nullptr);

}  // namespace mixt
