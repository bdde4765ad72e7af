// An out-of-tree learning-rate schedule: the rate falls linearly from the optimizer's `lr`
// (times `start_factor`) to `end_factor` times it over `total_steps` optimizer steps (by
// default the whole run), then stays there; torch.optim.lr_scheduler.LinearLR in closed form.
#include <mixt/helpers/lr_schedule.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

#include <algorithm>
#include <memory>
#include <optional>

namespace {

class LinearDecay : public mixt::ScheduleByStep {
 public:
  LinearDecay(const mixt::SchedulerContext& context, double start_factor, double end_factor, std::int64_t total_steps)
      : ScheduleByStep(context), start_(start_factor), end_(end_factor), total_(total_steps) {
    start();  // sets step 0's rate: lr_at can answer now
  }

  double lr_at(std::int64_t step) const override {
    const double progress = static_cast<double>(std::min(step, total_)) / static_cast<double>(total_);
    return base_lr() * (start_ + (end_ - start_) * progress);
  }

 private:
  double start_, end_;
  std::int64_t total_;
};

// The recipe's `scheduler:` section.
struct LinearDecayOptions {
  double start_factor = 1.0;
  double end_factor = 0.0;
  // Its default depends on the run: described in words, empty when not given, and filled in
  // by the factory from its context.
  std::optional<std::int64_t> total_steps;
};

using O = LinearDecayOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .add(&O::start_factor, "start_factor", "the first step's rate, as a multiple of lr",
             mixt::above(0) && mixt::at_most(1))
        .add(&O::end_factor, "end_factor", "the last step's rate, as a multiple of lr", mixt::between(0, 1))
        .contextual(&O::total_steps, "total_steps", "the run's optimizer steps (epochs x steps per epoch)",
                    "optimizer steps to decay over", mixt::at_least(1));

std::unique_ptr<mixt::Scheduler> make_linear_decay(const O& o, const mixt::SchedulerContext& context) {
  // steps_per_epoch counts optimizer steps: batches / trainer.accumulate, at most
  // trainer.max_steps_per_epoch.
  const std::int64_t run_steps = std::max<std::int64_t>(1, context.epochs * context.steps_per_epoch);
  return std::make_unique<LinearDecay>(context, o.start_factor, o.end_factor, o.total_steps.value_or(run_steps));
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("linear_decay", "linear decay of the learning rate (LinearLR)", kOptions, make_linear_decay);
}

}  // namespace

MIXT_PLUGIN("linear_decay", "1.0.0", register_components)
