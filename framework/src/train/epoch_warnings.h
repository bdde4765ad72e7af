// Warnings after an epoch whose run must not read as "done": most of its steps skipped by
// the precision policy, or a validation loss that is inf or NaN.
#pragma once

#include <cstdint>

#include "mixt/callback.h"

namespace mixt {

// `epoch`: 0-based; `steps` attempted in it, `skipped` of them by the policy.
void warn_if_most_steps_were_skipped(std::int64_t epoch, std::int64_t steps, std::int64_t skipped);
void warn_if_validation_is_not_finite(std::int64_t epoch, const Evaluation& evaluation);

}  // namespace mixt
