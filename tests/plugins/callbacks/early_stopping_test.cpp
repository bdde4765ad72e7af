// The early_stopping callback on recorded validation figures, against hand computations;
// and through the trainer, where its request ends the run after the epoch's checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "assembly/components.h"
#include "blob_training.h"
#include "common/run_directory.h"
#include "expect_error.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"
#include "train/stop_control.h"
#include "train/trainer.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Callback> make(testing::BuiltPlugins& plugins, const std::string& options) {
  return plugins.registry.make_callback(
      Config(parse_yaml("c: {name: early_stopping, " + options + "}", "t"), "").section("c"),
      CallbackContext{at::kCPU, nullptr, 0, 1});
}

// Feeds epochs first..last (1-based) of `losses` as val_loss (and `ema` as val_loss_ema);
// the epoch whose on_epoch_end asked for the stop, if any.
std::optional<std::int64_t> feed(Callback& callback, const std::vector<double>& losses, std::size_t first,
                                 std::size_t last, StopControl& control, double top1 = 0.5) {
  TrainState state;
  state.epochs = static_cast<std::int64_t>(losses.size());
  for (std::size_t e = first; e <= last; ++e) {
    state.epoch = static_cast<std::int64_t>(e) - 1;
    Evaluation eval;
    eval.loss = losses[e - 1];
    eval.figures = {{"top1", "top-1", true, true, top1}};
    eval.samples = 100;
    Evaluation ema = eval;
    ema.weights = "ema";
    ema.loss = losses[e - 1] / 2;
    callback.on_epoch_end(EpochEnd{state, &eval, {ema}, 0, 0, {}, control});
    if (control.stop_requested()) return static_cast<std::int64_t>(e);
  }
  return std::nullopt;
}

// By hand, min_delta 0.02, patience 2: epoch 1 sets the best (1.00); 0.80 < 0.98 improves
// (best 0.80); 0.81 and 0.79 are not below 0.78: two epochs without, so epoch 4 stops.
// With min_delta 0, 0.79 improves (best 0.79), 0.85 and 0.90 do not: epoch 6 stops.
const std::vector<double> kLosses = {1.00, 0.80, 0.81, 0.79, 0.85, 0.90, 0.95, 0.70};

TEST(EarlyStopping, StopsAtTheEpochAHandComputationSays) {
  testing::BuiltPlugins plugins;
  StopControl with_delta, without;
  auto delta = make(plugins, "patience: 2, min_delta: 0.02");
  EXPECT_EQ(feed(*delta, kLosses, 1, 8, with_delta), 4);
  EXPECT_EQ(with_delta.request()->reason,
            "val_loss did not improve by more than 0.02 for 2 epochs (best 0.8 after epoch 2)");
  auto plain = make(plugins, "patience: 2");
  EXPECT_EQ(feed(*plain, kLosses, 1, 8, without), 6);
  EXPECT_EQ(without.request()->reason, "val_loss did not improve for 2 epochs (best 0.79 after epoch 4)");
  EXPECT_EQ(without.request()->when, StopWhen::after_evaluation);

  // val_top1 is a maximum by default: the same 0.5 every epoch improves once, then patience 3 stops epoch 4.
  StopControl top1;
  auto accuracy = make(plugins, "monitor: val_top1, patience: 3");
  EXPECT_EQ(feed(*accuracy, kLosses, 1, 8, top1), 4);
  // mode max on the losses: 1.00 is the best until 0.70... never: patience 5 stops epoch 6.
  StopControl max;
  auto inverted = make(plugins, "mode: max, patience: 5");
  EXPECT_EQ(feed(*inverted, kLosses, 1, 8, max), 6);
  // The ema's figures: halved, the same epochs.
  StopControl ema;
  auto averaged = make(plugins, "monitor: val_loss_ema, patience: 2, min_delta: 0.01");
  EXPECT_EQ(feed(*averaged, kLosses, 1, 8, ema), 4);
}

// Stopped after epoch 3 and resumed from its state: one epoch without improvement is
// counted already, so it stops at epoch 4 as the uninterrupted run does.
TEST(EarlyStopping, ResumesItsPatienceCounter) {
  testing::BuiltPlugins plugins;
  StopControl first_part, second_part;
  auto before = make(plugins, "patience: 2, min_delta: 0.02");
  EXPECT_EQ(feed(*before, kLosses, 1, 3, first_part), std::nullopt);
  torch::serialize::OutputArchive saved;
  before->save(saved);
  std::ostringstream bytes;
  saved.save_to(bytes);
  torch::serialize::InputArchive loaded;
  std::istringstream in(bytes.str());
  loaded.load_from(in);
  auto after = make(plugins, "patience: 2, min_delta: 0.02");
  after->load(loaded);
  EXPECT_EQ(feed(*after, kLosses, 4, 8, second_part), 4);

  auto fresh = make(plugins, "patience: 2, min_delta: 0.02");  // what a resume that forgot would do
  StopControl forgot;
  EXPECT_EQ(feed(*fresh, kLosses, 4, 8, forgot), 6);
}

TEST(EarlyStopping, ChecksItsOptions) {
  testing::BuiltPlugins plugins;
  EXPECT_THROW(make(plugins, "monitor: train_loss"), Error);
  EXPECT_THROW(make(plugins, "mode: lowest"), Error);
  EXPECT_THROW(make(plugins, "patience: 0"), Error);
}

// Through the trainer: with mode max on the loss (which falls epoch after epoch on the
// blobs) and patience 1, epoch 2 is no improvement and the run ends after it, exit 0.
TEST(EarlyStopping, EndsATrainingRunAfterTheEpochsCheckpoint) {
  at::set_num_threads(1);
  testing::TempDir dir;
  testing::Fixture f;
  f.components.callbacks.push_back({make(f.plugins, "mode: max, patience: 1"), "early_stopping", "early_stopping", ""});
  RunDirectory run(dir.path(), "early");
  const TrainResult result = Trainer(f.components, f.facts, testing::options(5), &run, f.progress).fit();
  ASSERT_TRUE(result.stopped_early);
  EXPECT_EQ(result.stopped_early->by, "early_stopping");
  EXPECT_THAT(result.stopped_early->reason, HasSubstr("val_loss did not improve for 1 epoch (best "));
  EXPECT_EQ(result.optimizer_steps, 32);
  EXPECT_TRUE(std::filesystem::exists(run.checkpoints() / "epoch-0002"));
}

// What a recipe's `callbacks:` makes of the keys: the name alone, unless the recipe lists the
// callback twice; then the entry's label, or its number among them. Two alike are an error.
TEST(EarlyStopping, ListedTwiceEachEntryKeepsItsStateUnderItsLabelOrNumber) {
  at::set_num_threads(1);
  testing::BuiltPlugins plugins;
  const auto keys = [&](const std::string& callbacks) {
    const Config recipe(
        parse_yaml("model: {name: simple_cnn, channels: [4], hidden: 8}\nprecision: {name: fp32}\n"
                   "optimizer: {name: sgd, lr: 0.01}\ndata: {train: {name: synthetic, shape: [1, 8, 8], "
                   "num_classes: 2, size: 8, batch_size: 4}}\ntrainer: {device: cpu}\ncallbacks: " +
                       callbacks + "\n",
                   "r.yaml"),
        "");
    const TrainerOptions options = TrainerOptions::read(recipe.section("trainer"));
    std::vector<std::string> found;
    RunFacts facts;
    for (const NamedCallback& c :
         build_components(recipe, plugins.registry, options, recipe.section("trainer"), facts).callbacks) {
      if (c.name == "early_stopping") found.push_back(c.key());
    }
    return found;
  };
  EXPECT_EQ(keys("[{name: early_stopping}]"), (std::vector<std::string>{"early_stopping"}));
  EXPECT_EQ(keys("[{name: early_stopping, label: patient, patience: 9}, {name: early_stopping}]"),
            (std::vector<std::string>{"early_stopping:patient", "early_stopping:2"}));
  const Error e =
      testing::thrown_error([&] { keys("[{name: early_stopping, label: x}, {name: early_stopping, label: x}]"); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.message(), HasSubstr("two entries of callback 'early_stopping' keep their state as "
                                     "'early_stopping:x'"));
}

}  // namespace
}  // namespace mixt
