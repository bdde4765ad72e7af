// schedulers/cosine — linear warm-up, then cosine decay to `min_lr` at the end of the
// run, per optimizer step. The same curve as torch.optim.lr_scheduler.SequentialLR of
// LinearLR(start_factor, 1.0, total_iters=W) and CosineAnnealingLR(T_max=T-W, eta_min)
// with milestone W (NVIDIA's ResNet-50 v1.5 recipe: warm-up then cosine).
#include <mixt/helpers/lr_schedule.h>
#include <mixt/plugin.h>

#include <cmath>
#include <numbers>
#include <string>

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

std::unique_ptr<mixt::Scheduler> make_cosine(const mixt::Config& c, const mixt::SchedulerContext& context) {
  const std::int64_t total = context.steps_per_epoch * context.epochs;
  std::int64_t warmup = c.integer("warmup_steps", 0);
  if (c.has("warmup_epochs")) {
    if (warmup > 0) c.fail("warmup_epochs", "give warmup_epochs or warmup_steps, not both");
    warmup = static_cast<std::int64_t>(
        std::llround(c.number("warmup_epochs") * static_cast<double>(context.steps_per_epoch)));
  }
  const double start_factor = c.number("start_factor", 0.0);
  const double min_lr = c.number("min_lr", 0.0);
  if (warmup < 0) c.fail(c.has("warmup_epochs") ? "warmup_epochs" : "warmup_steps", "must not be negative");
  if (warmup > total) {
    c.fail(c.has("warmup_epochs") ? "warmup_epochs" : "warmup_steps",
           "warm-up (" + std::to_string(warmup) + " steps) is longer than the whole run (" + std::to_string(total) +
               " steps)");
  }
  if (start_factor < 0 || start_factor > 1) c.fail("start_factor", "must be in [0, 1]");
  if (min_lr < 0) c.fail("min_lr", "must not be negative");
  return std::make_unique<CosineSchedule>(context, warmup, total, start_factor, min_lr);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_scheduler("cosine",
                          {"linear warm-up then cosine decay to min_lr over the run, per step",
                           {{"warmup_epochs", "0", "warm-up length in epochs (may be fractional)"},
                            {"warmup_steps", "0", "warm-up length in optimizer steps (instead of epochs)"},
                            {"start_factor", "0.0", "warm-up starts at start_factor * lr"},
                            {"min_lr", "0.0", "learning rate at the end of the run"}}},
                          make_cosine);
}

}  // namespace

MIXT_PLUGIN("cosine", "1.0.0", register_components)
