#include "diagnose/observations.h"

#include <algorithm>
#include <cmath>

namespace mixt::diagnose {

std::int64_t Observations::skipped() const {
  return std::count_if(steps.begin(), steps.end(), [](const StepRecord& s) { return !s.applied; });
}

bool Observations::losses_finite() const {
  return std::all_of(steps.begin(), steps.end(), [](const StepRecord& s) { return std::isfinite(s.loss); });
}

bool Observations::healthy(double max_skipped_fraction) const {
  return !steps.empty() && losses_finite() &&
         static_cast<double>(skipped()) <= max_skipped_fraction * static_cast<double>(steps.size());
}

}  // namespace mixt::diagnose
