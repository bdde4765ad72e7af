// The best_checkpoint callback through the trainer on the blobs problem: the best epochs'
// checkpoints outlive keep_checkpoints' rotation, `best` names the best of them, and a
// resumed run (in a run directory of its own) keeps the ranking and the better copies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "blob_training.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "common/run_directory.h"
#include "expect_error.h"
#include "test_support.h"
#include "train/trainer.h"

namespace mixt {
namespace {

namespace fs = std::filesystem;

// Each epoch's val_loss and the model's weights then.
class Record final : public Callback {
 public:
  explicit Record(std::shared_ptr<Model> model) : model_(std::move(model)) {}
  void on_epoch_end(const EpochEnd& e) override {
    losses[e.state.epoch + 1] = e.evaluation->loss;
    weights[e.state.epoch + 1] = model_->parameters()[0].detach().clone();
  }
  std::map<std::int64_t, double> losses;
  std::map<std::int64_t, at::Tensor> weights;

 private:
  std::shared_ptr<Model> model_;
};

std::shared_ptr<Callback> make_best(testing::Fixture& f) {
  // mode max on the loss, which falls epoch after epoch here: the best are the first
  // epochs, the ones keep_checkpoints: 1 rotates away.
  return f.plugins.registry.make_callback(
      Config(parse_yaml("c: {name: best_checkpoint, monitor: val_loss, mode: max, save_top_k: 2}", "t"), "")
          .section("c"),
      CallbackContext{at::kCPU, f.components.model, 0, 1});
}

std::set<std::string> files_in(const fs::path& directory) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.insert(entry.path().filename().string());
  return names;
}

at::Tensor first_weights(const fs::path& checkpoint) {
  CheckpointContents contents = read_checkpoint(checkpoint);
  return checkpoint_weights(contents, checkpoint, /*ema=*/false).front().second;
}

std::string best_name(std::int64_t epoch) { return "best-epoch-000" + std::to_string(epoch); }

// The two epochs with the highest val_loss of a run, best first.
std::vector<std::int64_t> two_highest(const std::map<std::int64_t, double>& losses) {
  std::vector<std::int64_t> epochs;
  for (const auto& item : losses) epochs.push_back(item.first);
  std::stable_sort(epochs.begin(), epochs.end(), [&](auto a, auto b) { return losses.at(a) > losses.at(b); });
  return {epochs[0], epochs[1]};
}

struct RankedRun {
  testing::Fixture f;
  std::shared_ptr<Record> record = std::make_shared<Record>(f.components.model);
  RankedRun() {
    at::set_num_threads(1);
    f.components.callbacks.push_back({make_best(f), "best_checkpoint", "best_checkpoint", ""});
    f.components.callbacks.push_back({record, "record", "fixture", ""});
  }
};

TEST(BestCheckpoint, KeepsTheTopKEpochsThroughRotationAndResumesTheRanking) {
  testing::TempDir dir;
  TrainerOptions four = testing::options(4);
  four.keep_checkpoints = 1;
  RankedRun whole;
  RunDirectory run(dir.path(), "whole");
  Trainer(whole.f.components, whole.f.facts, four, &run, whole.f.progress).fit();
  const std::vector<std::int64_t> best = two_highest(whole.record->losses);
  EXPECT_EQ(files_in(run.checkpoints()),
            (std::set<std::string>{"epoch-0004", "last", best_name(best[0]), best_name(best[1]), "best"}));
  EXPECT_EQ(fs::read_symlink(run.checkpoints() / "best"), best_name(best[0]));
  for (const std::int64_t epoch : best) {
    EXPECT_TRUE(at::equal(first_weights(run.checkpoints() / best_name(epoch)), whole.record->weights[epoch]))
        << "epoch " << epoch;
  }
  EXPECT_EQ(resolve_best_checkpoint(run.path()), fs::canonical(run.checkpoints() / best_name(best[0])));

  // The same run in two parts: 2 epochs, then resumed (a new run directory) for 2 more.
  TrainerOptions two = four;
  two.epochs = 2;
  RankedRun first;
  RunDirectory first_run(dir.path(), "first");
  Trainer(first.f.components, first.f.facts, two, &first_run, first.f.progress).fit();
  const std::string first_best_bytes = testing::read_file(first_run.checkpoints() / best_name(best[0]));
  RankedRun second;
  RunDirectory second_run(dir.path(), "second");
  Trainer resumed(second.f.components, second.f.facts, four, &second_run, second.f.progress);
  resumed.resume(first_run.path());
  resumed.fit();
  EXPECT_EQ(second.record->losses,
            (std::map<std::int64_t, double>{{3, whole.record->losses[3]}, {4, whole.record->losses[4]}}));
  EXPECT_EQ(files_in(second_run.checkpoints()), files_in(run.checkpoints()));
  EXPECT_EQ(fs::read_symlink(second_run.checkpoints() / "best"), best_name(best[0]));
  for (const std::int64_t epoch : best) {
    EXPECT_TRUE(at::equal(first_weights(second_run.checkpoints() / best_name(epoch)), whole.record->weights[epoch]))
        << "epoch " << epoch;
  }
  // The earlier run's copies are left as they were.
  EXPECT_EQ(testing::read_file(first_run.checkpoints() / best_name(best[0])), first_best_bytes);
}

TEST(BestCheckpoint, ARunWithoutOneHasNoBestToExport) {
  testing::TempDir dir;
  const Error e = testing::thrown_error([&] { resolve_best_checkpoint(dir.path()); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.hint(), ::testing::HasSubstr("best_checkpoint callback"));
}

}  // namespace
}  // namespace mixt
