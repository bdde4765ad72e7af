// schedulers/step — torch.optim.lr_scheduler.StepLR counted in epochs: the learning rate
// is multiplied by `gamma` every `step_epochs` epochs.
#include <mixt/helpers/lr_schedule.h>
#include <mixt/options.h>
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

const mixt::Option<std::int64_t> kStepEpochs{"step_epochs", 30, "epochs between decays", mixt::at_least(1)};
const mixt::Option<double> kGamma{"gamma", 0.1, "decay factor", mixt::above(0)};

std::unique_ptr<mixt::Scheduler> make_step(const mixt::Config& c, const mixt::SchedulerContext& context) {
  const std::int64_t step_epochs = kStepEpochs.read(c);
  const double gamma = kGamma.read(c);
  return std::make_unique<StepSchedule>(context, step_epochs * std::max<std::int64_t>(1, context.steps_per_epoch),
                                        gamma);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler(
      "step", {"multiply the learning rate by gamma every step_epochs epochs (StepLR)", {kStepEpochs, kGamma}},
      make_step);
}

}  // namespace

MIXT_PLUGIN("step", "1.0.0", register_components)
