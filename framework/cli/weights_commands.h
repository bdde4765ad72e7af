// `mixt export` and `mixt predict`: weights and inference in and out of mixt, through
// safetensors files named as torchvision names its tensors.
#pragma once

#include <string>
#include <vector>

namespace mixt::cli {

// Writes the model state of a checkpoint (a file, a run's checkpoints/ directory or a run
// directory) as `format` (only "safetensors") to `output`.
// `ema`: the ema callback's average (kept in the checkpoint's callbacks) instead of the model.
// `best`: the run's checkpoints/best (the best_checkpoint callback's) instead of its newest.
int export_weights(const std::string& checkpoint, const std::string& format, const std::string& output, bool ema,
                   bool best = false);

// Builds the recipe's model (with its `weights:`), runs it in eval mode on the tensor in
// `input` (a safetensors file with one tensor, or one named "input"), and writes the
// result to `output` as the tensor "output".
int predict(const std::string& recipe, const std::vector<std::string>& overrides, const std::string& input,
            const std::string& output);

}  // namespace mixt::cli
