// What `mixt diagnose` records over the steps of one run: per routed module its outputs'
// float16 counts, per parameter its gradients' float16 underflow, per step the loss, the
// loss scale and whether the step was applied, and where the first inf/NaN appeared; per
// float8 linear layer what its casts lose (float8_range.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnose/float16_range.h"
#include "diagnose/float8_range.h"

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

// A float8 layer's casts, by operand (mixt::Float8Operand: input, weight, output gradient),
// the first step's apart: a delayed-scaling recipe's first casts use its initial scales.
struct Float8Layer {
  std::string name;
  std::array<Float8CastCounts, 3> first_step, later;
  // The counts a verdict goes by: the later steps', or the first's when there were none.
  const std::array<Float8CastCounts, 3>& judged() const { return later[0].values > 0 ? later : first_step; }
};

struct Observations {
  std::vector<std::pair<std::string, OutputCounts>> modules;        // in first-call order
  std::vector<std::pair<std::string, UnderflowCounts>> parameters;  // in the optimizer's order
  std::vector<StepRecord> steps;
  std::optional<FirstNonFinite> first_nonfinite;
  std::vector<Float8Layer> float8_layers;  // in first-cast order

  std::int64_t skipped() const;
  bool losses_finite() const;
  // Every loss finite and at most `max_skipped_fraction` of the steps skipped.
  bool healthy(double max_skipped_fraction) const;
};

}  // namespace mixt::diagnose
