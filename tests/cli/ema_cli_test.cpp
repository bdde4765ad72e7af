// The ema callback in real runs: evaluated beside the model (val_*_ema), exported with
// `mixt export --ema`, and without effect on the training itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "mixt/helpers/safetensors.h"
#include "test_support.h"

namespace mixt {
namespace {

struct TrainedRun {
  fs::path directory;
  std::vector<nlohmann::json> epochs;  // metrics.jsonl's epoch events
};

TrainedRun train(const TempDir& dir, const std::string& name, const std::string& callbacks) {
  dir.write(name + ".yaml", testing::replace_once(testing::kTinyRecipe, "name: tiny", "name: " + name) + callbacks);
  const CommandResult run = run_mixt({"run", name + ".yaml"}, dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  TrainedRun result;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / name)) result.directory = entry.path();
  std::istringstream lines(testing::read_file(result.directory / "metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "epoch") result.epochs.push_back(event);
  }
  return result;
}

NamedTensors exported(const TempDir& dir, const TrainedRun& run, bool ema) {
  const std::string file = run.directory.filename().string() + (ema ? "-ema" : "") + ".safetensors";
  std::vector<std::string> args = {"export", run.directory.string(), "-o", file};
  if (ema) args.push_back("--ema");
  const CommandResult result = run_mixt(args, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  NamedTensors tensors = load_safetensors(dir.path() / file).tensors;
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return tensors;
}

bool same(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !at::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

TEST(EmaCli, TheAverageIsEvaluatedExportedAndLeavesTrainingAlone) {
  TempDir dir;
  // decay 0: the average is the weights themselves, so its evaluation is the model's.
  const TrainedRun copy = train(dir, "copy", "callbacks: [{name: ema, decay: 0}]\n");
  ASSERT_EQ(copy.epochs.size(), 2u);
  for (const auto& epoch : copy.epochs) {
    EXPECT_EQ(epoch["val_loss_ema"], epoch["val_loss"]) << epoch;
    EXPECT_EQ(epoch["val_top1_ema"], epoch["val_top1"]) << epoch;
    EXPECT_EQ(epoch["val_top5_ema"], epoch["val_top5"]) << epoch;
  }
  EXPECT_TRUE(same(exported(dir, copy, true), exported(dir, copy, false)));

  // A real average: evaluated apart, and the live weights trained exactly as without it.
  const TrainedRun averaged = train(dir, "averaged", "callbacks: [{name: ema, decay: 0.9}]\n");
  const TrainedRun plain = train(dir, "plain", "");
  ASSERT_EQ(averaged.epochs.size(), 2u);
  ASSERT_EQ(plain.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(averaged.epochs[e]["val_loss"], plain.epochs[e]["val_loss"]);
    EXPECT_NE(averaged.epochs[e]["val_loss_ema"], averaged.epochs[e]["val_loss"]);
    EXPECT_FALSE(plain.epochs[e].contains("val_loss_ema"));
  }
  const NamedTensors live = exported(dir, averaged, false);
  EXPECT_TRUE(same(live, exported(dir, plain, false)));
  EXPECT_FALSE(same(exported(dir, averaged, true), live));

  const CommandResult none = run_mixt({"export", plain.directory.string(), "--ema", "-o", "x.safetensors"}, dir.path());
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_THAT(none.output, HasSubstr("holds no EMA weights"));
}

}  // namespace
}  // namespace mixt
