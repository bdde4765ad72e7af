// The trainer with a step decided on the device (mixt::StepOutcome from a sync-free
// loss-scaled step) must behave exactly as with the same decision made on the host: the
// same weights, skipped-step counts, learning rates (the scheduler steps on applied steps
// only) and StepEnd fields for the callbacks.
#include <gtest/gtest.h>

#include "blob_training.h"
#include "mixt/autocast.h"
#include "mixt/helpers/grad_scaler.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"
#include "train/trainer.h"

namespace mixt {
namespace {

// amp_fp16's policy with the scaler's path chosen: sync-free (a device outcome) or general.
class ScalerPolicy : public PrecisionPolicy {
 public:
  explicit ScalerPolicy(bool step_on_device) : scaler_(options(step_on_device)) {}
  AutocastScope autocast(at::DeviceType device) const override { return AutocastScope(device, at::kHalf); }
  void backward(const at::Tensor& loss) override { scaler_.scale(loss).backward(); }
  void unscale(Optimizer& optimizer) override { scaler_.unscale_(optimizer); }
  StepOutcome step(Optimizer& optimizer) override { return scaler_.step(optimizer); }
  void update() override { scaler_.update(); }

 private:
  static GradScalerOptions options(bool step_on_device) {
    GradScalerOptions o;
    o.growth_interval = 3;
    o.step_on_device = step_on_device;
    return o;
  }
  GradScaler scaler_;
};

struct Seen {
  std::vector<bool> applied;
  std::vector<double> learning_rates;
  std::vector<std::int64_t> skipped_on_logged_steps;
  bool operator==(const Seen&) const = default;
};

class Recorder : public Callback {
 public:
  explicit Recorder(Seen& seen) : seen_(seen) {}
  void on_step_end(const StepEnd& step) override {
    seen_.applied.push_back(step.applied.applied());  // a host read, on purpose
    seen_.learning_rates.push_back(step.learning_rate);
    if (step.logged) seen_.skipped_on_logged_steps.push_back(step.state.skipped_steps);
  }

 private:
  Seen& seen_;
};

struct Outcome {
  std::vector<at::Tensor> weights;
  Seen seen;
  std::int64_t skipped_steps = 0, result_skipped_steps = 0;
};

// `with_scheduler`: the scheduler reads each outcome before the trainer counts it; without
// one, the skipped steps are summed on the device and settled on logged steps.
Outcome train(bool step_on_device, const std::string& optimizer, bool clip, bool with_scheduler) {
  testing::Fixture f({.nan_at = 9});
  f.root = parse_yaml("optimizer: " + optimizer, "test");
  f.use_model(f.components.model);
  // The first step overflows float16 before any optimizer state exists; so do two later ones.
  dynamic_cast<testing::BlobDataset&>(*f.components.train).overflow_at({0, 5, 20});
  f.components.val.reset();
  f.components.precision = std::make_unique<ScalerPolicy>(step_on_device);
  if (with_scheduler) {
    const RecipeNodePtr root = parse_yaml("scheduler: {name: cosine}", "test");
    f.components.scheduler =
        f.plugins.registry.make_scheduler(Config(root, "").section("scheduler"), {f.components.optimizer.get(), 16, 2});
  }
  TrainerOptions o = testing::options(2);
  o.log_every = 4;
  o.clip_grad_norm = clip ? 1.0 : 0.0;
  Outcome outcome;
  Trainer trainer(f.components, f.facts, o, nullptr, f.progress);
  trainer.add_callback(std::make_shared<Recorder>(outcome.seen), "recorder");
  const TrainResult result = trainer.fit();
  outcome.weights = f.weights();
  outcome.skipped_steps = trainer.state().skipped_steps;
  outcome.result_skipped_steps = result.skipped_steps;
  return outcome;
}

TEST(SyncFreeTrainer, SkipsCountsAndSchedulesExactlyAsTheSynchronisingStep) {
  for (const char* optimizer :
       {"{name: sgd, lr: 0.05, momentum: 0.9, fused: true}",
        "{name: sgd, lr: 0.05, momentum: 0.9, dampening: 0.2, fused: true}", "{name: adamw, lr: 0.01, fused: true}"}) {
    for (const auto& [clip, with_scheduler] :
         {std::pair{false, true}, std::pair{true, true}, std::pair{false, false}}) {
      const Outcome sync_free = train(true, optimizer, clip, with_scheduler);
      const Outcome synchronising = train(false, optimizer, clip, with_scheduler);
      const std::string what =
          std::string(optimizer) + (clip ? ", clipped" : "") + (with_scheduler ? ", cosine" : ", no scheduler");
      EXPECT_TRUE(testing::same(sync_free.weights, synchronising.weights)) << what;
      EXPECT_EQ(sync_free.seen.applied, synchronising.seen.applied) << what;
      EXPECT_EQ(sync_free.seen.learning_rates, synchronising.seen.learning_rates) << what;
      EXPECT_EQ(sync_free.seen.skipped_on_logged_steps, synchronising.seen.skipped_on_logged_steps) << what;
      EXPECT_EQ(sync_free.skipped_steps, synchronising.skipped_steps) << what;
      EXPECT_EQ(sync_free.result_skipped_steps, synchronising.skipped_steps) << what;
      EXPECT_GE(synchronising.skipped_steps, 4) << what << ": three overflows and a NaN batch";
      ASSERT_EQ(synchronising.seen.applied.size(), 32U) << what;
      EXPECT_FALSE(synchronising.seen.applied[0]) << what << ": the first step must be skipped";
    }
  }
}

}  // namespace
}  // namespace mixt
