// A note at start-up when the precision policy computes in a type this device only
// emulates or runs slowly: decided from the policy's autocast and casts and from the CPU's
// features, whatever the policy is called, so a plugin of one's own is told too.
#pragma once

#include <string>

#include "mixt/model.h"
#include "mixt/precision.h"

namespace mixt {

// The note for `policy` (its recipe name) after its setup() on `model`, or "" when there is
// nothing to say (fp32, any GPU, a CPU with native bfloat16 for a bfloat16 policy).
std::string speed_note(const std::string& policy, const PrecisionPolicy& precision, const Model& model,
                       at::Device device);

// Warns `note` unless this process already did: mixt diagnose and the tests build the same
// policy many times.
void warn_once(const std::string& note);

}  // namespace mixt
