// The callback contract, through the real trainer on the blobs problem: the order of the
// calls over epochs with validation, under gradient accumulation, on an interrupt and on
// resume; a callback's own state across trainer.resume; and a callback that throws.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "blob_training.h"
#include "common/run_directory.h"
#include "expect_error.h"
#include "test_support.h"
#include "train/trainer.h"

namespace mixt {
namespace {

using testing::Fixture;
using testing::options;

// Writes down every call as a short line ("step 3/16 global 3").
class Recorder final : public Callback {
 public:
  void on_fit_start(const FitStart& fit) override {
    calls.push_back("fit_start at " + std::to_string(fit.state.global_step));
  }
  void on_epoch_start(const EpochStart& e) override {
    calls.push_back("epoch_start " + std::to_string(e.state.epoch) + " of " + std::to_string(e.steps_in_epoch) +
                    " from " + std::to_string(e.first_step));
  }
  void on_step_end(const StepEnd& s) override {
    calls.push_back("step " + std::to_string(s.epoch_step) + "/" + std::to_string(s.steps_in_epoch) + " global " +
                    std::to_string(s.state.global_step));
    losses.push_back(s.loss.item<double>());
  }
  void on_evaluation_start(const TrainState& state, const std::string& weights) override {
    calls.push_back("evaluation_start " + std::to_string(state.epoch) + (weights.empty() ? "" : " " + weights));
  }
  void on_evaluation_end(const TrainState& state, const Evaluation& eval) override {
    calls.push_back("evaluation_end " + std::to_string(state.epoch) + " " + std::to_string(eval.samples) +
                    (eval.weights.empty() ? "" : " " + eval.weights));
  }
  void on_epoch_end(const EpochEnd& e) override {
    calls.push_back("epoch_end " + std::to_string(e.state.epoch) + (e.evaluation ? " evaluated" : ""));
    for (const Evaluation& other : e.other_weights) calls.back() += " and " + other.weights;
    if (e.evaluation) evaluations.push_back(*e.evaluation);
    evaluations.insert(evaluations.end(), e.other_weights.begin(), e.other_weights.end());
  }
  void on_interrupt(const TrainState& state, const fs::path& checkpoint) override {
    calls.push_back("interrupt at " + std::to_string(state.global_step));
    interrupt_checkpoint = checkpoint;
    checkpoint_existed = fs::exists(checkpoint);
  }
  void on_fit_end(const TrainState& state) override { calls.push_back("fit_end " + std::to_string(state.epoch)); }

  std::vector<std::string> calls;
  std::vector<double> losses;
  std::vector<Evaluation> evaluations;  // the epochs' own, then other weights'
  fs::path interrupt_checkpoint;
  bool checkpoint_existed = false;
};

// Counts the steps it saw, in checkpoints too.
class StepCounter final : public Callback {
 public:
  void on_step_end(const StepEnd&) override { ++steps; }
  void save(torch::serialize::OutputArchive& archive) const override { archive.write("steps", c10::IValue(steps)); }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    archive.read("steps", value);
    steps = value.toInt();
  }
  std::int64_t steps = 0;
};

// Evaluates the weights the model started with, swapped in for its evaluation and out after.
class FirstWeights final : public Callback {
 public:
  explicit FirstWeights(std::shared_ptr<Model> model) : model_(std::move(model)) {}
  void on_fit_start(const FitStart&) override {
    for (const auto& p : model_->parameters()) first_.push_back(p.detach().clone());
  }
  std::string evaluated_weights() const override { return "first"; }
  void on_evaluation_start(const TrainState&, const std::string& weights) override {
    if (weights != "first") return;
    at::NoGradGuard no_grad;
    live_.clear();
    auto parameters = model_->parameters();
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      live_.push_back(parameters[i].detach().clone());
      parameters[i].copy_(first_[i]);
    }
  }
  void on_evaluation_end(const TrainState&, const Evaluation& evaluation) override {
    if (evaluation.weights != "first") return;
    at::NoGradGuard no_grad;
    auto parameters = model_->parameters();
    for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i].copy_(live_[i]);
  }

 private:
  std::shared_ptr<Model> model_;
  std::vector<at::Tensor> first_, live_;
};

class ThrowsAtStep final : public Callback {
 public:
  explicit ThrowsAtStep(std::int64_t step) : step_(step) {}
  void on_step_end(const StepEnd& s) override {
    if (s.state.global_step == step_) throw std::runtime_error("disk quota exceeded");
  }

 private:
  std::int64_t step_;
};

std::shared_ptr<Recorder> add_recorder(Fixture& f) {
  auto recorder = std::make_shared<Recorder>();
  f.components.callbacks.push_back({recorder, "recorder", "fixture", "libfixture.so"});
  return recorder;
}

// What the contract says the calls are over `epochs` uninterrupted epochs of `steps`.
std::vector<std::string> expected_calls(std::int64_t epochs, std::int64_t steps, bool validation) {
  std::vector<std::string> calls = {"fit_start at 0"};
  for (std::int64_t e = 0; e < epochs; ++e) {
    calls.push_back("epoch_start " + std::to_string(e) + " of " + std::to_string(steps) + " from 0");
    for (std::int64_t s = 1; s <= steps; ++s) {
      calls.push_back("step " + std::to_string(s) + "/" + std::to_string(steps) + " global " +
                      std::to_string(e * steps + s));
    }
    if (validation) {
      calls.push_back("evaluation_start " + std::to_string(e));
      calls.push_back("evaluation_end " + std::to_string(e) + " 256");
    }
    calls.push_back("epoch_end " + std::to_string(e) + (validation ? " evaluated" : ""));
  }
  calls.push_back("fit_end " + std::to_string(epochs));
  return calls;
}

TEST(Callbacks, AreCalledInOrderOverEpochsWithValidation) {
  Fixture f;
  auto recorder = add_recorder(f);
  Trainer(f.components, f.facts, options(2), nullptr, f.progress).fit();
  EXPECT_EQ(recorder->calls, expected_calls(2, 16, true));

  Fixture without_validation;
  without_validation.components.val.reset();
  auto second = add_recorder(without_validation);
  Trainer(without_validation.components, without_validation.facts, options(1), nullptr, without_validation.progress)
      .fit();
  EXPECT_EQ(second->calls, expected_calls(1, 16, false));
}

// A callback's weights get an evaluation of their own after the model's, between its
// on_evaluation_start and _end; the model's training is as it would be without it.
TEST(Callbacks, OtherWeightsAreEvaluatedAfterTheModelsAndSwappedBack) {
  Fixture plain;
  auto baseline = add_recorder(plain);
  Trainer(plain.components, plain.facts, options(2), nullptr, plain.progress).fit();

  Fixture f;
  auto recorder = add_recorder(f);
  f.components.callbacks.push_back({std::make_shared<FirstWeights>(f.components.model), "first", "fixture", ""});
  Trainer(f.components, f.facts, options(2), nullptr, f.progress).fit();
  std::vector<std::string> expected = expected_calls(2, 16, true);
  for (std::int64_t e = 1; e >= 0; --e) {
    const auto end = std::find(expected.begin(), expected.end(), "epoch_end " + std::to_string(e) + " evaluated");
    *end += " and first";
    expected.insert(end, {"evaluation_start " + std::to_string(e) + " first",
                          "evaluation_end " + std::to_string(e) + " 256 first"});
  }
  EXPECT_EQ(recorder->calls, expected);
  EXPECT_EQ(recorder->losses, baseline->losses);  // bit for bit: the live weights came back
  ASSERT_EQ(recorder->evaluations.size(), 4u);
  for (std::size_t e = 0; e < 2; ++e) {
    const Evaluation& own = recorder->evaluations[2 * e];
    const Evaluation& first = recorder->evaluations[2 * e + 1];
    EXPECT_EQ(own.loss, baseline->evaluations[e].loss);
    EXPECT_EQ(first.weights, "first");
    EXPECT_GT(first.loss, own.loss);  // the untrained weights are the worse model
    EXPECT_EQ(first.figure("top4"), 1.0);  // four blobs: top-k over every class
    EXPECT_TRUE(std::isnan(first.figure("top5")));
  }
}

// 16 batches in steps of 3: five full steps and a last one of a single batch, whose loss
// is that batch's (not a third of it).
TEST(Callbacks, SeeOneStepEndPerOptimizerStepUnderAccumulation) {
  Fixture f;
  f.components.val.reset();
  auto recorder = add_recorder(f);
  TrainerOptions o = options(1);
  o.accumulate = 3;
  Trainer(f.components, f.facts, o, nullptr, f.progress).fit();
  EXPECT_EQ(recorder->calls, expected_calls(1, 6, false));

  // The same run by hand: each step's mean loss over its micro-batches, before its update.
  Fixture reference;
  reference.components.val.reset();
  Dataset& data = *reference.components.train;
  data.start_epoch(0);
  ASSERT_EQ(recorder->losses.size(), 6u);
  for (std::size_t step = 0; step < 6; ++step) {
    reference.components.optimizer->zero_grad();
    double sum = 0;
    int micro_batches = 0;
    for (; micro_batches < 3; ++micro_batches) {
      std::optional<Batch> batch = data.next_batch();
      if (!batch) break;
      const at::Tensor loss = at::cross_entropy_loss(reference.components.model->forward(batch->inputs),
                                                     batch->targets) / 3.0;
      loss.backward();
      sum += loss.item<double>() * 3.0;
    }
    reference.components.optimizer->step();
    EXPECT_NEAR(recorder->losses[step], sum / micro_batches, 1e-5) << "step " << step + 1;
  }
}

TEST(Callbacks, AreToldOfAnInterruptAfterItsCheckpointIsWritten) {
  testing::TempDir dir;
  clear_interrupt_request();
  Fixture f({.interrupt_at = 21});  // the 22nd batch: step 6 of epoch 2
  auto recorder = add_recorder(f);
  RunDirectory run(dir.path(), "interrupted");
  EXPECT_THROW(Trainer(f.components, f.facts, options(2), &run, f.progress).fit(), Error);
  clear_interrupt_request();
  ASSERT_GE(recorder->calls.size(), 2u);
  EXPECT_EQ(recorder->calls.back(), "interrupt at 22");
  EXPECT_EQ(recorder->calls[recorder->calls.size() - 2], "step 6/16 global 22");
  EXPECT_EQ(recorder->interrupt_checkpoint, run.checkpoints() / "interrupted");
  EXPECT_TRUE(recorder->checkpoint_existed);
}

TEST(Callbacks, KeepTheirStateAcrossResumeAndSeeTheRestOfTheRun) {
  testing::TempDir dir;
  clear_interrupt_request();
  Fixture first({.interrupt_at = 21});
  auto counted = std::make_shared<StepCounter>();
  first.components.callbacks.push_back({counted, "counter", "fixture", ""});
  RunDirectory run(dir.path(), "interrupted");
  EXPECT_THROW(Trainer(first.components, first.facts, options(2), &run, first.progress).fit(), Error);
  clear_interrupt_request();
  EXPECT_EQ(counted->steps, 22);

  Fixture resumed;
  auto continued = std::make_shared<StepCounter>();
  resumed.components.callbacks.push_back({continued, "counter", "fixture", ""});
  auto recorder = add_recorder(resumed);
  Trainer trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress);
  trainer.resume(run.checkpoints() / "interrupted");
  trainer.fit();
  EXPECT_EQ(continued->steps, 32);  // 22 before the interrupt, 10 after
  ASSERT_GE(recorder->calls.size(), 3u);
  EXPECT_EQ(recorder->calls[0], "fit_start at 22");
  EXPECT_EQ(recorder->calls[1], "epoch_start 1 of 16 from 6");
  EXPECT_EQ(recorder->calls[2], "step 7/16 global 23");
}

TEST(Callbacks, OneThatThrowsIsNamedAndTheCheckpointsStay) {
  testing::TempDir dir;
  Fixture f;
  f.components.callbacks.push_back({std::make_shared<ThrowsAtStep>(20), "thrower", "fixture_plugin", "libf.so"});
  RunDirectory run(dir.path(), "thrown");
  SCOPED_TRACE(::testing::Message() << "expected the callback's failure");
  const Error e = testing::thrown_error([&] { Trainer(f.components, f.facts, options(2), &run, f.progress).fit(); });
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_THAT(e.message(), HasSubstr("callback 'thrower' (plugin 'fixture_plugin') failed in on_step_end: disk quota "
                             "exceeded"))
      << e.message();
  EXPECT_EQ(e.where().file, "libf.so");
  EXPECT_THAT(e.hint(), HasSubstr("4 completed steps of epoch 2"));
  EXPECT_TRUE(fs::exists(run.checkpoints() / "epoch-0001"));
  EXPECT_TRUE(fs::exists(run.checkpoints() / "interrupted"));
}

// The policy's side of the step: begin_step gets each step's global number and whether the
// trainer logs it, before its first micro-batch.
class RecordsSteps final : public PrecisionPolicy {
 public:
  void begin_step(std::int64_t step, bool logged) override {
    steps.push_back(step);
    if (logged) logged_steps.push_back(step);
  }
  std::vector<std::int64_t> steps, logged_steps;
};

TEST(PrecisionContract, BeginStepGetsTheGlobalStepAndWhetherItIsLogged) {
  Fixture f;
  auto policy = std::make_unique<RecordsSteps>();
  RecordsSteps& recorded = *policy;
  f.components.precision = std::move(policy);
  TrainerOptions o = options(2);
  o.log_every = 5;  // epoch steps 5, 10 and 15 of 16
  Trainer(f.components, f.facts, o, nullptr, f.progress).fit();
  std::vector<std::int64_t> all(32);
  for (std::int64_t i = 0; i < 32; ++i) all[static_cast<std::size_t>(i)] = i + 1;
  EXPECT_EQ(recorded.steps, all);
  EXPECT_EQ(recorded.logged_steps, (std::vector<std::int64_t>{5, 10, 15, 21, 26, 31}));
}

}  // namespace
}  // namespace mixt
