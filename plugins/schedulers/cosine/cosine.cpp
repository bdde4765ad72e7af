// schedulers/cosine — linear warm-up, then cosine decay to `min_lr` at the end of the
// run, per optimizer step. The same curve as torch.optim.lr_scheduler.SequentialLR of
// LinearLR(start_factor, 1.0, total_iters=W) and CosineAnnealingLR(T_max=T-W, eta_min)
// with milestone W (NVIDIA's ResNet-50 v1.5 recipe: warm-up then cosine).
#include <mixt/helpers/lr_schedule.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/scheduler.h>

#include <cmath>
#include <numbers>
#include <string>

#include "../common/warmup_options.h"

namespace {

class CosineSchedule : public mixt::ScheduleByStep {
 public:
  CosineSchedule(const mixt::SchedulerContext& context, std::int64_t warmup, std::int64_t total,
                 double start_factor, double min_lr)
      : ScheduleByStep(context), warmup_(warmup), total_(total), start_factor_(start_factor), min_lr_(min_lr) {
    start();
  }

  double lr_at(std::int64_t step) const override {
    if (step < warmup_) {
      const double progress = static_cast<double>(step) / static_cast<double>(warmup_);
      return base_lr() * (start_factor_ + (1.0 - start_factor_) * progress);
    }
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_ - warmup_));
    const double t = std::min(static_cast<double>(step - warmup_), span);
    return min_lr_ + (base_lr() - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * t / span));
  }

 private:
  std::int64_t warmup_, total_;
  double start_factor_, min_lr_;
};

struct CosineOptions {
  mixt::schedulers::WarmupOptions warmup;
  double start_factor = 0.0;
  double min_lr = 0.0;
};

using O = CosineOptions;
const auto kOptions =
    mixt::OptionsOf<O>()
        .include(&O::warmup, mixt::schedulers::kWarmupOptions)
        .add(&O::start_factor, "start_factor", "warm-up starts at start_factor * lr", mixt::between(0, 1))
        .add(&O::min_lr, "min_lr", "learning rate at the end of the run", mixt::at_least(0));

std::unique_ptr<mixt::Scheduler> make_cosine(const CosineOptions& o, const mixt::SchedulerContext& context) {
  const std::int64_t total = context.steps_per_epoch * context.epochs;
  const std::int64_t warmup = o.warmup.in_steps(context.steps_per_epoch);
  if (warmup > total) {  // needs the context: no rule can say it
    o.warmup.fail("warm-up (" + std::to_string(warmup) + " steps) is longer than the whole run (" +
                  std::to_string(total) + " steps)");
  }
  return std::make_unique<CosineSchedule>(context, warmup, total, o.start_factor, o.min_lr);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("cosine", "linear warm-up then cosine decay to min_lr over the run, per step", kOptions,
                          make_cosine);
}

}  // namespace

MIXT_PLUGIN("cosine", "1.0.0", register_components)
