// A language model's recipe without a data section (a transformers checkpoint to sample from
// or export): the model is built from its own options, and what the data would have said is
// asked of the model itself: the vocabulary it predicts (the last size of its output for one
// token) and the longest sequence it takes (mixt::CachedDecoding's context_length).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "experiment/inference.h"
#include "mixt/precision.h"
#include "mixt/task.h"

namespace mixt {

bool recipe_has_data(const Recipe& recipe);

// The context length a model says it takes (mixt::CachedDecoding), or 0.
std::int64_t model_context_length(const Model& model);

struct ModelOnly {
  std::unique_ptr<Task> task;
  std::unique_ptr<Inference> inference;
  // The recipe's precision policy set up on the model (fp32 when the recipe names none): the
  // autocast its outputs are computed under. Null when not asked for.
  std::unique_ptr<PrecisionPolicy> precision;
  std::int64_t vocabulary = 0;      // for a task that predicts the next token; else 0
  std::int64_t context_length = 0;  // 0 when the model does not say
};

// `command` ("generate") names the command in errors; `device`: where the model runs
// regardless of trainer.device (export traces on the CPU); `with_precision`: set the policy up
// on the model (export leaves the model as it is built: no policy).
ModelOnly build_model_only(const ModelPlan& plan, const Registry& registry, bool ema, const std::string& command,
                           std::optional<at::Device> device = std::nullopt, bool with_precision = true);

}  // namespace mixt
