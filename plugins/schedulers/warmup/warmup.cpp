// schedulers/warmup — linear warm-up to the optimizer's learning rate, then constant
// (torch.optim.lr_scheduler.LinearLR(start_factor, 1.0, total_iters=W)).
#include <mixt/helpers/lr_schedule.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/scheduler.h>

#include <cmath>

#include "../common/warmup_options.h"

namespace {

class WarmupSchedule : public mixt::ScheduleByStep {
 public:
  WarmupSchedule(const mixt::SchedulerContext& context, std::int64_t warmup, double start_factor)
      : ScheduleByStep(context), warmup_(warmup), start_factor_(start_factor) {
    start();
  }
  double lr_at(std::int64_t step) const override {
    if (warmup_ == 0 || step >= warmup_) return base_lr();
    return base_lr() *
           (start_factor_ + (1.0 - start_factor_) * static_cast<double>(step) / static_cast<double>(warmup_));
  }

 private:
  std::int64_t warmup_;
  double start_factor_;
};

struct WarmupOnlyOptions {
  mixt::schedulers::WarmupOptions warmup;
  double start_factor = 1.0 / 3.0;
};

using O = WarmupOnlyOptions;
const auto kOptions = mixt::OptionsOf<O>()
                          .include(&O::warmup, mixt::schedulers::kWarmupOptions)
                          .add(&O::start_factor, "start_factor", "warm-up starts at start_factor * lr",
                               mixt::above(0) && mixt::at_most(1));

std::unique_ptr<mixt::Scheduler> make_warmup(const WarmupOnlyOptions& o, const mixt::SchedulerContext& context) {
  return std::make_unique<WarmupSchedule>(context, o.warmup.in_steps(context.steps_per_epoch), o.start_factor);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("warmup", "linear warm-up to the base learning rate, then constant (LinearLR)", kOptions,
                          make_warmup);
}

}  // namespace

MIXT_PLUGIN("warmup", "1.0.0", register_components)
