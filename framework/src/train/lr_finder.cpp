#include "train/lr_finder.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "train/trainer.h"

namespace mixt {

namespace {

// The ramp through the scheduler seam: the trainer calls step() after each applied step,
// which sets the learning rate of the next one (a skipped step does not advance it).
class RampScheduler final : public Scheduler {
 public:
  RampScheduler(Optimizer& optimizer, LrRamp ramp) : optimizer_(optimizer), ramp_(ramp) {
    optimizer_.set_learning_rate(ramp_.lr_at(0));
  }
  void step() override { optimizer_.set_learning_rate(ramp_.lr_at(++applied_)); }
  void save(torch::serialize::OutputArchive& /*archive*/) override {}
  void load(torch::serialize::InputArchive& /*archive*/) override {}

 private:
  Optimizer& optimizer_;
  LrRamp ramp_;
  std::int64_t applied_ = 0;
};

class RangeTestCallback final : public Callback {
 public:
  RangeTestCallback(LrRangeTest& test, std::function<void(const LrRangeTest&)> on_point)
      : test_(test), on_point_(std::move(on_point)) {}
  void on_step_end(const StepEnd& step) override {
    test_.record(step.loss.item<double>(), step.applied.applied());
    if (on_point_) on_point_(test_);
    if (test_.finished()) {
      step.control.request_stop(test_.diverged() ? "the loss diverged" : "the ramp is done", StopWhen::after_step);
    }
  }

 private:
  LrRangeTest& test_;
  std::function<void(const LrRangeTest&)> on_point_;
};

}  // namespace

LrFindResult find_learning_rate(Components& components, const RunFacts& facts, TrainerOptions options,
                                Coordinator* coordinator, const LrRamp& ramp,
                                const std::function<void(const LrRangeTest&)>& on_point) {
  LrFindResult result{LrRangeTest(ramp)};
  components.val.reset();
  components.callbacks.clear();  // early stopping, best checkpoints, an EMA: not for a range test
  components.scheduler = std::make_unique<RampScheduler>(*components.optimizer, ramp);
  // Room for as many skipped steps as applied ones (a loss scaler's first few skip), over as
  // many epochs of the data as that takes; the callback ends the run before.
  const std::int64_t attempts = 2 * ramp.steps;
  const std::int64_t per_epoch = std::max<std::int64_t>(1, components.train->batches_per_epoch() / options.accumulate);
  options.epochs = (attempts + per_epoch - 1) / per_epoch;
  options.max_steps_per_epoch = std::min(per_epoch, attempts);
  options.stop_on_nonfinite_loss = false;  // a diverging loss is how the test ends
  options.log_every = std::numeric_limits<std::int64_t>::max() / 2;
  Progress quiet(false, options.log_every, /*quiet=*/true);
  Trainer trainer(components, facts, options, nullptr, quiet, coordinator);
  trainer.add_callback(std::make_shared<RangeTestCallback>(result.test, on_point), "lr_find");
  trainer.fit();
  result.data_ran_out = !result.test.finished();
  return result;
}

}  // namespace mixt
