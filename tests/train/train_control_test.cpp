// Callbacks that steer, through the real trainer on the blobs problem (16 steps an epoch):
// a stop asked after a step and after an evaluation is a normal end with its checkpoint
// and final evaluation; the callbacks' state in an epoch's checkpoint is the state after
// its evaluation and on_epoch_end; state is found by name whatever the order of callbacks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "blob_training.h"
#include "checkpoint/checkpoint.h"
#include "test_support.h"
#include "common/run_directory.h"
#include "train/trainer.h"
#include "common/warnings.h"

namespace mixt {
namespace {

namespace fs = std::filesystem;
using testing::Fixture;
using ::testing::HasSubstr;
using testing::options;

// Asks for a stop after global step `at_step` (from on_step_end, `when`) or at the end of
// epoch `at_epoch` (1-based, from on_epoch_end); writes down the calls it sees after that.
class Stopper final : public Callback {
 public:
  Stopper(std::int64_t at_step, std::int64_t at_epoch, StopWhen when = StopWhen::after_step)
      : at_step_(at_step), at_epoch_(at_epoch), when_(when) {}
  void on_step_end(const StepEnd& s) override {
    calls.push_back("step " + std::to_string(s.state.global_step));
    if (s.state.global_step == at_step_) s.control.request_stop("enough at step " + std::to_string(at_step_), when_);
  }
  void on_evaluation_end(const TrainState& state, const Evaluation&) override {
    calls.push_back("evaluation " + std::to_string(state.epoch + 1));
  }
  void on_epoch_end(const EpochEnd& e) override {
    calls.push_back("epoch_end " + std::to_string(e.state.epoch + 1));
    checkpoints.push_back(e.checkpoint);
    if (e.state.epoch + 1 == at_epoch_) e.control.request_stop("enough after epoch " + std::to_string(at_epoch_));
  }
  void on_fit_end(const TrainState& state) override { calls.push_back("fit_end " + std::to_string(state.epoch)); }

  std::vector<std::string> calls;
  std::vector<fs::path> checkpoints;  // EpochEnd::checkpoint of each epoch

 private:
  std::int64_t at_step_, at_epoch_;
  StopWhen when_;
};

// Counts what it saw, in checkpoints too: steps, epoch ends.
class Counter final : public Callback {
 public:
  void on_step_end(const StepEnd&) override { ++steps; }
  void on_epoch_end(const EpochEnd&) override { ++epoch_ends; }
  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("steps", c10::IValue(steps));
    archive.write("epoch_ends", c10::IValue(epoch_ends));
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue value;
    archive.read("steps", value);
    steps = value.toInt();
    archive.read("epoch_ends", value);
    epoch_ends = value.toInt();
  }
  std::int64_t steps = 0, epoch_ends = 0;
};

std::vector<std::string> tail(const std::vector<std::string>& calls, std::size_t n) {
  return {calls.end() - static_cast<std::ptrdiff_t>(std::min(n, calls.size())), calls.end()};
}

std::vector<nlohmann::json> events(const fs::path& run, const std::string& kind) {
  std::vector<nlohmann::json> found;
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event.value("event", "") == kind) found.push_back(event);
  }
  return found;
}

nlohmann::json header_of(const fs::path& checkpoint) { return read_checkpoint(checkpoint).header; }

// Step 20 is step 4 of epoch 2: the run ends there, saves the mid-epoch checkpoint a
// resume continues from, evaluates, ends the epoch and the fit, and returns normally.
TEST(TrainControl, AStopAfterAStepEndsTheRunWithItsCheckpointAndFinalEvaluation) {
  at::set_num_threads(1);
  testing::TempDir dir;
  Fixture f;
  auto stopper = std::make_shared<Stopper>(20, 0);
  f.components.callbacks.push_back({stopper, "stopper", "fixture", ""});
  RunDirectory run(dir.path(), "stopped");
  const TrainResult result = Trainer(f.components, f.facts, options(3), &run, f.progress).fit();

  ASSERT_TRUE(result.stopped_early);
  EXPECT_EQ(result.stopped_early->by, "stopper");
  EXPECT_EQ(result.stopped_early->reason, "enough at step 20");
  EXPECT_EQ(result.optimizer_steps, 20);
  ASSERT_TRUE(result.final_eval);
  EXPECT_EQ(result.final_eval->samples, 256);
  EXPECT_EQ(tail(stopper->calls, 4), (std::vector<std::string>{"step 20", "evaluation 2", "epoch_end 2", "fit_end 1"}));
  ASSERT_EQ(stopper->checkpoints.size(), 2u);
  EXPECT_EQ(stopper->checkpoints[0], run.checkpoints() / "epoch-0001");
  EXPECT_EQ(stopper->checkpoints[1], run.checkpoints() / "interrupted");
  EXPECT_FALSE(fs::exists(run.checkpoints() / "epoch-0002"));
  const nlohmann::json header = header_of(run.checkpoints() / "interrupted");
  EXPECT_EQ(header["epoch"], 1);  // 0-based: in epoch 2
  EXPECT_EQ(header["batches_in_epoch"], 4);
  EXPECT_EQ(header["global_step"], 20);

  const auto stops = events(run.path(), "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["by"], "stopper");
  EXPECT_EQ(stops[0]["reason"], "enough at step 20");
  EXPECT_EQ(stops[0]["when"], "after_step");
  EXPECT_EQ(stops[0]["step"], 20);
  EXPECT_THAT(testing::read_file(run.path() / "log.txt"), HasSubstr("stopped early by stopper: enough at step 20"));

  // Resuming the run directory continues after step 20 (its newest checkpoint).
  Fixture resumed;
  auto counter = std::make_shared<Counter>();
  resumed.components.callbacks.push_back({counter, "counter", "fixture", ""});
  Trainer trainer(resumed.components, resumed.facts, options(3), nullptr, resumed.progress);
  trainer.resume(run.path());
  EXPECT_EQ(trainer.state().global_step, 20);
  trainer.fit();
  EXPECT_EQ(counter->steps, 28);  // 12 left of epoch 2, 16 of epoch 3
}

// Asked from on_epoch_end: the run ends after that epoch's checkpoint, as a finished one would.
TEST(TrainControl, AStopAfterAnEvaluationEndsAfterTheEpochsCheckpoint) {
  at::set_num_threads(1);
  testing::TempDir dir;
  Fixture f;
  auto stopper = std::make_shared<Stopper>(0, 2);
  f.components.callbacks.push_back({stopper, "stopper", "fixture", ""});
  RunDirectory run(dir.path(), "stopped");
  const TrainResult result = Trainer(f.components, f.facts, options(4), &run, f.progress).fit();
  ASSERT_TRUE(result.stopped_early);
  EXPECT_EQ(result.stopped_early->reason, "enough after epoch 2");
  EXPECT_EQ(result.stopped_early->when, StopWhen::after_evaluation);
  EXPECT_EQ(result.optimizer_steps, 32);
  EXPECT_TRUE(result.final_eval);
  EXPECT_EQ(tail(stopper->calls, 3), (std::vector<std::string>{"evaluation 2", "epoch_end 2", "fit_end 2"}));
  EXPECT_EQ(fs::read_symlink(run.checkpoints() / "last"), "epoch-0002");
  EXPECT_FALSE(fs::exists(run.checkpoints() / "interrupted"));
  EXPECT_EQ(header_of(run.checkpoints() / "epoch-0002")["epoch"], 2);
  const auto stops = events(run.path(), "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["when"], "after_evaluation");
  EXPECT_EQ(stops[0]["epoch"], 2);
}

// Asked mid-epoch for after the evaluation: the epoch runs to its end first. Asked in the
// last epoch: nothing is left to stop, and the run ends as finished.
TEST(TrainControl, AStopForAfterTheEvaluationAskedMidEpochFinishesTheEpoch) {
  at::set_num_threads(1);
  Fixture f;
  auto stopper = std::make_shared<Stopper>(20, 0, StopWhen::after_evaluation);
  f.components.callbacks.push_back({stopper, "stopper", "fixture", ""});
  const TrainResult result = Trainer(f.components, f.facts, options(3), nullptr, f.progress).fit();
  ASSERT_TRUE(result.stopped_early);
  EXPECT_EQ(result.optimizer_steps, 32);

  Fixture last;
  auto late = std::make_shared<Stopper>(0, 2);
  last.components.callbacks.push_back({late, "stopper", "fixture", ""});
  const TrainResult finished = Trainer(last.components, last.facts, options(2), nullptr, last.progress).fit();
  EXPECT_FALSE(finished.stopped_early);
  EXPECT_EQ(finished.optimizer_steps, 32);
}

// The epoch's checkpoint is written before its evaluation, then holds the callbacks' state
// from after on_epoch_end: a resume from epoch-0001 has seen one epoch end, not none.
TEST(TrainControl, AnEpochsCheckpointHoldsTheCallbacksStateAfterItsEvaluation) {
  at::set_num_threads(1);
  testing::TempDir dir;
  Fixture f;
  auto counter = std::make_shared<Counter>();
  f.components.callbacks.push_back({counter, "counter", "fixture", ""});
  RunDirectory run(dir.path(), "counted");
  TrainerOptions o = options(2);
  o.keep_checkpoints = 2;
  Trainer(f.components, f.facts, o, &run, f.progress).fit();
  for (const std::int64_t epoch : {1, 2}) {
    Fixture resumed;
    auto loaded = std::make_shared<Counter>();
    resumed.components.callbacks.push_back({loaded, "counter", "fixture", ""});
    Trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress)
        .resume(run.checkpoints() / epoch_checkpoint_name(epoch));
    EXPECT_EQ(loaded->epoch_ends, epoch) << "epoch-000" << epoch;
    EXPECT_EQ(loaded->steps, 16 * epoch);
  }
}

// State is keyed by name: swapping two callbacks between the run and its resume gives each
// its own; a callback the checkpoint has no state for, and state no callback takes, are
// named in one warning.
TEST(TrainControl, ReorderedCallbacksKeepTheirOwnStateAndMismatchesAreNamed) {
  at::set_num_threads(1);
  testing::TempDir dir;
  Fixture f;
  auto steps = std::make_shared<Counter>(), gone = std::make_shared<Counter>();
  auto stopper = std::make_shared<Stopper>(20, 0);
  f.components.callbacks.push_back({steps, "a_counter", "fixture", ""});
  f.components.callbacks.push_back({stopper, "stopper", "fixture", ""});
  f.components.callbacks.push_back({gone, "gone", "fixture", ""});
  RunDirectory run(dir.path(), "ordered");
  Trainer(f.components, f.facts, options(2), &run, f.progress).fit();
  ASSERT_EQ(steps->steps, 20);

  Fixture resumed;
  auto fresh = std::make_shared<Counter>(), again = std::make_shared<Counter>();
  resumed.components.callbacks.push_back({fresh, "new_counter", "fixture", ""});
  resumed.components.callbacks.push_back({again, "a_counter", "fixture", ""});
  std::vector<std::string> warnings;
  {
    WarningLog log([&](const std::string& line) { warnings.push_back(line); }, /*echo=*/false);
    Trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress).resume(run.path());
  }
  EXPECT_EQ(again->steps, 20);
  EXPECT_EQ(again->epoch_ends, 2);  // epoch 1's, and the one the stop ended early
  EXPECT_EQ(fresh->steps, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("state of callback 'gone', which this recipe does not have, is left unused"));
  EXPECT_THAT(warnings[0], HasSubstr("no state for callback 'new_counter' (it starts as new)"));
  EXPECT_THAT(warnings[0], ::testing::Not(HasSubstr("stopper")));  // it had no state
}

// One callback twice: "name:label" (or its number) keeps each entry's own state.
TEST(TrainControl, TwoEntriesOfOneCallbackKeepTheirStateByTheirKeys) {
  at::set_num_threads(1);
  testing::TempDir dir;
  Fixture f;
  auto first = std::make_shared<Counter>(), second = std::make_shared<Counter>();
  f.components.callbacks.push_back({first, "counter", "fixture", "", "counter:fast"});
  f.components.callbacks.push_back({second, "counter", "fixture", "", "counter:slow"});
  RunDirectory run(dir.path(), "twice");
  Trainer trainer(f.components, f.facts, options(1), &run, f.progress);
  trainer.fit();
  second->steps = 99;  // told apart from the first's 16
  trainer.save_checkpoint(run.checkpoints() / "both");

  Fixture resumed;
  auto slow = std::make_shared<Counter>(), fast = std::make_shared<Counter>();
  resumed.components.callbacks.push_back({slow, "counter", "fixture", "", "counter:slow"});
  resumed.components.callbacks.push_back({fast, "counter", "fixture", "", "counter:fast"});
  Trainer(resumed.components, resumed.facts, options(1), nullptr, resumed.progress).resume(run.checkpoints() / "both");
  EXPECT_EQ(fast->steps, 16);
  EXPECT_EQ(slow->steps, 99);
}

}  // namespace
}  // namespace mixt
