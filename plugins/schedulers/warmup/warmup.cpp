// schedulers/warmup — linear warm-up to the optimizer's learning rate, then constant
// (torch.optim.lr_scheduler.LinearLR(start_factor, 1.0, total_iters=W)).
#include <mixt/helpers/lr_schedule.h>
#include <mixt/plugin.h>

#include <cmath>

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

std::unique_ptr<mixt::Scheduler> make_warmup(const mixt::Config& c, const mixt::SchedulerContext& context) {
  std::int64_t warmup = c.integer("warmup_steps", 0);
  if (c.has("warmup_epochs")) {
    if (warmup > 0) c.fail("warmup_epochs", "give warmup_epochs or warmup_steps, not both");
    warmup = static_cast<std::int64_t>(
        std::llround(c.number("warmup_epochs") * static_cast<double>(context.steps_per_epoch)));
  }
  const double start_factor = c.number("start_factor", 1.0 / 3.0);
  if (warmup < 0) c.fail(c.has("warmup_epochs") ? "warmup_epochs" : "warmup_steps", "must not be negative");
  if (start_factor <= 0 || start_factor > 1) c.fail("start_factor", "must be in (0, 1]");
  return std::make_unique<WarmupSchedule>(context, warmup, start_factor);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("warmup",
                          {"linear warm-up to the base learning rate, then constant (LinearLR)",
                           {{"warmup_epochs", "0", "warm-up length in epochs (may be fractional)"},
                            {"warmup_steps", "0", "warm-up length in optimizer steps (instead of epochs)"},
                            {"start_factor", "0.3333", "warm-up starts at start_factor * lr"}}},
                          make_warmup);
}

}  // namespace

MIXT_PLUGIN("warmup", "1.0.0", register_components)
