// What `mixt diagnose` records over the steps of one run: per routed module its outputs'
// float16 counts, per parameter its gradients' float16 underflow, per step the loss, the
// loss scale and whether the step was applied, and where the first inf/NaN appeared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnose/float16_range.h"

namespace mixt::diagnose {

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;         // the mean over the step's micro-batches
  double loss_scale = 1;   // the scale its backward used (1 for a policy that does not scale)
  bool applied = true;
};

struct FirstNonFinite {
  std::string module;  // the first routed module, in call order, whose output held inf/NaN
  std::int64_t step = 0;
};

struct Observations {
  std::vector<std::pair<std::string, OutputCounts>> modules;        // in first-call order
  std::vector<std::pair<std::string, UnderflowCounts>> parameters;  // in the optimizer's order
  std::vector<StepRecord> steps;
  std::optional<FirstNonFinite> first_nonfinite;

  std::int64_t skipped() const;
  bool losses_finite() const;
  // Every loss finite and at most `max_skipped_fraction` of the steps skipped.
  bool healthy(double max_skipped_fraction) const;
};

}  // namespace mixt::diagnose
