// mixt/helpers/lr_schedule.h — a Scheduler defined by a closed-form learning rate per step.
//
// A scheduler plugin subclasses ScheduleByStep and implements lr_at(step): the learning
// rate for optimizer step `step` (0-based, counting applied steps only). The base class
// keeps the step counter, sets the optimizer's rate at construction (step 0) and after
// every applied step, and saves/loads the counter in checkpoints — the same protocol as
// torch.optim.lr_scheduler.
#pragma once

#include <cstdint>

#include "mixt/scheduler.h"

namespace mixt {

class ScheduleByStep : public Scheduler {
 public:
  explicit ScheduleByStep(const SchedulerContext& context)
      : optimizer_(*context.optimizer), base_lr_(context.optimizer->learning_rate()) {}

  void step() override {
    ++step_;
    optimizer_.set_learning_rate(lr_at(step_));
  }
  void save(torch::serialize::OutputArchive& archive) override {
    archive.write("step", c10::IValue(step_));
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    archive.read("step", value);
    step_ = value.toInt();
    optimizer_.set_learning_rate(lr_at(step_));
  }

  virtual double lr_at(std::int64_t step) const = 0;
  double base_lr() const { return base_lr_; }

 protected:
  // Subclasses call this at the end of their constructor, once lr_at() can answer.
  void start() { optimizer_.set_learning_rate(lr_at(0)); }

 private:
  Optimizer& optimizer_;
  double base_lr_;
  std::int64_t step_ = 0;
};

}  // namespace mixt
