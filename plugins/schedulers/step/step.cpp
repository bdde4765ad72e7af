// schedulers/step — torch.optim.lr_scheduler.StepLR counted in epochs: the learning rate
// is multiplied by `gamma` every `step_epochs` epochs.
#include <mixt/helpers/lr_schedule.h>
#include <mixt/plugin.h>

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

std::unique_ptr<mixt::Scheduler> make_step(const mixt::Config& c, const mixt::SchedulerContext& context) {
  const std::int64_t step_epochs = c.integer("step_epochs", 30);
  const double gamma = c.number("gamma", 0.1);
  if (step_epochs < 1) c.fail("step_epochs", "must be at least 1");
  if (gamma <= 0) c.fail("gamma", "must be positive");
  return std::make_unique<StepSchedule>(context, step_epochs * std::max<std::int64_t>(1, context.steps_per_epoch),
                                        gamma);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("step",
                          {"multiply the learning rate by gamma every step_epochs epochs (StepLR)",
                           {{"step_epochs", "30", "epochs between decays"}, {"gamma", "0.1", "decay factor"}}},
                          make_step);
}

}  // namespace

MIXT_PLUGIN("step", "1.0.0", register_components)
