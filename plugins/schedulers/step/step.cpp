// schedulers/step — torch.optim.lr_scheduler.StepLR counted in epochs: the learning rate
// is multiplied by `gamma` every `step_epochs` epochs.
#include <mixt/helpers/lr_schedule.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/scheduler.h>

#include <cmath>

namespace {

class StepSchedule : public mixt::ScheduleByStep {
 public:
  StepSchedule(const mixt::SchedulerContext& context, std::int64_t step_size, double gamma)
      : ScheduleByStep(context), step_size_(step_size), gamma_(gamma) {
    start();
  }
  double lr_at(std::int64_t step) const override {
    return base_lr() * std::pow(gamma_, static_cast<double>(step / step_size_));
  }

 private:
  std::int64_t step_size_;
  double gamma_;
};

struct StepOptions {
  std::int64_t step_epochs = 30;
  double gamma = 0.1;
};

using O = StepOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .add(&O::step_epochs, "step_epochs", "epochs between decays", mixt::at_least(1))
                          .add(&O::gamma, "gamma", "decay factor", mixt::above(0));

std::unique_ptr<mixt::Scheduler> make_step(const StepOptions& o, const mixt::SchedulerContext& context) {
  return std::make_unique<StepSchedule>(context, o.step_epochs * std::max<std::int64_t>(1, context.steps_per_epoch),
                                        o.gamma);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("step", "multiply the learning rate by gamma every step_epochs epochs (StepLR)", kOptions,
                          make_step);
}

}  // namespace

MIXT_PLUGIN("step", "1.0.0", register_components)
