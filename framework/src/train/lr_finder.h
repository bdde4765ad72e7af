// The learning-rate range test on a recipe's components (`mixt lr-find`): the Trainer's own
// step (precision policy, accumulation, data-parallel averaging, signals) with the recipe's
// scheduler replaced by the exponential ramp and a callback that records the curve and ends
// the run once the ramp is done or the loss diverged. Nothing is written or evaluated.
#pragma once

#include <functional>

#include "assembly/components.h"
#include "assembly/run_facts.h"
#include "assembly/trainer_options.h"
#include "common/coordinator.h"
#include "train/lr_range_test.h"

namespace mixt {

struct LrFindResult {
  LrRangeTest test;
  bool data_ran_out = false;  // the steps the trainer was given ended first (most of them skipped)
};

// Runs on `components` as built from the recipe, which it changes: the scheduler becomes the
// ramp, data.val and the recipe's callbacks are dropped, the weights and optimizer state are
// those the test leaves (build them anew to train). `coordinator`: null for one process; every
// rank calls this and records the same curve (the loss is every rank's mean). `on_point` is
// called after each step (for progress lines).
LrFindResult find_learning_rate(Components& components, const RunFacts& facts, TrainerOptions options,
                                Coordinator* coordinator, const LrRamp& ramp,
                                const std::function<void(const LrRangeTest&)>& on_point);

}  // namespace mixt
