// What to do when a batch does not fit: said by the trainer (an out-of-memory error in the
// forward pass, with the step) and by the command line (one anywhere else in a run).
#pragma once

namespace mixt {

inline constexpr const char* kOutOfMemoryHint =
    "lower data.train.batch_size (keep the global batch with trainer.accumulate), or use a mixed-precision "
    "policy (precision.name=amp_bf16 or amp_fp16: activations take half the memory)";

}  // namespace mixt
