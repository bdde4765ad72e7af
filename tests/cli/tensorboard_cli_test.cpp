// The tensorboard callback, proven by TensorBoard itself (tests/support/tensorboard_reader.py):
// its EventAccumulator (which checks every record's CRCs) and its real server's HTTP API
// read back the tags, steps and values of metrics.jsonl; a resumed run's file continues
// the steps; `enabled: false` turns it off.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "test_support.h"

namespace mixt {
namespace {

using nlohmann::json;

using Curves = std::map<std::string, std::vector<std::pair<std::int64_t, float>>>;

const std::string kCallbacks = "callbacks: [{name: ema, decay: 0.5}, {name: tensorboard, histograms_every: 8}]\n";

// metrics.jsonl as TensorBoard scalars: a step event's figures under train/, an epoch's
// val_* under val/ and bad_samples under data/; float32, TensorBoard's scalar type.
Curves expected_curves(const fs::path& run) {
  Curves curves;
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const json event = json::parse(line);
    if (event["event"] != "step" && event["event"] != "epoch") continue;  // warnings: text
    const auto step = event["step"].get<std::int64_t>();
    for (const auto& [key, value] : event.items()) {
      if (!value.is_number() || key == "epoch" || key == "step" || key == "epoch_step" ||
          key == "epoch_elapsed_s" || key == "elapsed_s") {
        continue;
      }
      std::string tag;
      if (event["event"] == "step") {
        tag = "train/" + key;
      } else if (key.rfind("val_", 0) == 0) {
        tag = "val/" + key.substr(4);
      } else {
        tag = "data/" + key;
      }
      curves[tag].emplace_back(step, static_cast<float>(value.get<double>()));
    }
  }
  return curves;
}

Curves read_curves(const json& scalars) {
  Curves curves;
  for (const auto& [tag, points] : scalars.items()) {
    for (const auto& point : points) {
      curves[tag].emplace_back(point[0].get<std::int64_t>(), static_cast<float>(point[1].get<double>()));
    }
  }
  return curves;
}

json read_back(const std::string& mode, const fs::path& run) {
  const CommandResult read = testing::run_command(
      "python3 " + testing::shell_quote(testing::configured::source_dir() + "/tests/support/tensorboard_reader.py") +
      " " + mode + " " + testing::shell_quote(run.string()));
  EXPECT_EQ(read.exit_code, 0) << read.output;
  return json::parse(read.output.substr(read.output.find('{')));
}

std::vector<fs::path> runs_of(const fs::path& dir) {
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(dir / "runs/tiny")) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

TEST(TensorBoard, EventFilesHoldMetricsJsonlAsTensorBoardReadsThem) {
  TempDir dir;
  dir.write("recipe.yaml", testing::kTinyRecipe + kCallbacks);
  const CommandResult run = testing::run_mixt({"run", "recipe.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path directory = runs_of(dir.path()).at(0);
  const Curves expected = expected_curves(directory);
  // Every figure metrics.jsonl has: the step's, top-1 and top-5 of the model and its EMA.
  for (const char* tag : {"train/loss", "train/lr", "train/samples_per_s", "train/skipped_steps", "val/loss",
                          "val/top1", "val/top5", "val/loss_ema", "val/top1_ema", "val/top5_ema"}) {
    EXPECT_EQ(expected.count(tag), 1u) << tag;
  }

  const json events = read_back("events", directory);
  EXPECT_EQ(events["files"].size(), 1u);
  EXPECT_EQ(read_curves(events["scalars"]), expected);
  // Histograms every 8 optimizer steps (2 epochs of 16), over every parameter of the model.
  for (const char* tag : {"norms/gradients", "norms/weights"}) {
    const json& histograms = events["histograms"][tag];
    ASSERT_EQ(histograms.size(), 4u) << tag;
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(histograms[i][0].get<std::int64_t>(), static_cast<std::int64_t>(8 * (i + 1))) << tag;
      EXPECT_EQ(histograms[i][1].get<double>(), 8.0) << tag;  // simple_cnn: 2 convolutions, 2 linear, with biases
      EXPECT_GT(histograms[i][2].get<double>(), 0.0) << tag;  // a norm of 0: a layer that learns nothing
    }
  }
  const std::string recipe = events["text"]["recipe"][0][1].get<std::string>();
  EXPECT_THAT(recipe, HasSubstr("simple_cnn"));

  // The real server, as a user opens it.
  const json served = read_back("serve", directory);
  EXPECT_EQ(read_curves(served["scalars"]), expected);

  // Resumed for a third epoch: a new run directory whose file goes on from step 32.
  const CommandResult resumed = testing::run_mixt(
      {"run", "recipe.yaml", "trainer.epochs=3", "trainer.resume=" + directory.string()}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const fs::path second = runs_of(dir.path()).at(1);
  const Curves continued = read_curves(read_back("events", second)["scalars"]);
  EXPECT_EQ(continued, expected_curves(second));
  ASSERT_FALSE(continued.at("train/loss").empty());
  EXPECT_EQ(continued.at("train/loss").front().first, 36);  // log_every 4 after step 32
  EXPECT_EQ(continued.at("val/top1").back().first, 48);
}

TEST(TensorBoard, EnabledFalseTurnsItOff) {
  TempDir dir;
  dir.write("recipe.yaml", testing::replace_once(testing::kTinyRecipe, "epochs: 2", "epochs: 1") +
                               "callbacks: [{name: tensorboard, enabled: false}]\n");
  const CommandResult run = testing::run_mixt({"run", "recipe.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path directory = runs_of(dir.path()).at(0);
  EXPECT_TRUE(fs::exists(directory / "metrics.jsonl"));
  for (const auto& entry : fs::directory_iterator(directory)) {
    EXPECT_EQ(entry.path().filename().string().rfind("events.out.tfevents.", 0), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace mixt
