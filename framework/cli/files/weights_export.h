// `mixt export`: weights out of mixt, as safetensors files named as torchvision (or
// transformers) names its tensors (`mixt predict`, in commands/predict_command.h, reads and writes them too).
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

// A usage error when `output` is named like a torch.save pickle (.pt, .pth, .bin, .ckpt,
// .pkl): `command` writes safetensors, which torch.load cannot read.
void refuse_pickle_name(const std::string& option, const std::string& output, const std::string& command);

}  // namespace mixt::cli
