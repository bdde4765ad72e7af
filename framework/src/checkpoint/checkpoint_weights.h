// The weights a checkpoint holds, by state-dict names, whatever policy trained them: what
// `mixt export` writes and `mixt evaluate` scores.
#pragma once

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "mixt/helpers/safetensors.h"

namespace mixt {

// The model's own weights, with a master-weight policy's float32 masters in place of the
// parameters they are the real values of (PrecisionPolicy::save), or with `ema` the ema
// callback's average (kept in the checkpoint's callbacks). A recipe error naming `file`
// when the checkpoint has no model state, or no average for `ema`.
NamedTensors checkpoint_weights(CheckpointContents& contents, const std::filesystem::path& file, bool ema);

// Whether the checkpoint's model state leaves out the frozen base: a run with an adapter
// (checkpoint/model_state.h), whose base the recipe's model.from or model.weights gives.
bool omits_frozen_base(CheckpointContents& contents);

}  // namespace mixt
