// End to end: a callback's stop request ends `mixt run` normally (exit 0, the checkpoint,
// the final evaluation, the `done: ... stopped early by` and `test accuracy:` lines, a
// "stop" event), in one process and as two Gloo ranks with the request on rank 1 only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "child_process.h"
#include "mixt/helpers/safetensors.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::only_run_directory;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

const std::string kStopPlugin = testing::configured::fixture_plugin_dir() + "/libmixt_fixture_stop_request.so";

// 4 optimizer steps an epoch (a global batch of 64), three epochs, an evaluation after each.
std::string recipe(const std::string& callback) {
  return R"(name: stop
plugins: [)" +
         kStopPlugin + R"(]
model:     { name: simple_cnn, channels: [4, 8], hidden: 16 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 64, limit: 256 }
  val:   { name: fashion_mnist, split: test, batch_size: 128, limit: 128 }
trainer: { epochs: 3, seed: 0, threads: 1, log_every: 1, distributed: { backend: gloo, timeout: 30 } }
callbacks: [)" +
         callback + R"(, {name: tensorboard, enabled: false}]
output: runs
)";
}

std::vector<nlohmann::json> stop_events(const fs::path& run) {
  std::vector<nlohmann::json> found;
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event.value("event", "") == "stop") found.push_back(event);
  }
  return found;
}

// The run's "epoch" event of `epoch`.
nlohmann::json epoch_event(const fs::path& run, std::int64_t epoch) {
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event.value("event", "") == "epoch" && event.value("epoch", std::int64_t{-1}) == epoch) return event;
  }
  ADD_FAILURE() << "no epoch " << epoch << " in " << run / "metrics.jsonl";
  return {};
}

TEST(StopRequestCli, AfterAStepAndAfterAnEvaluationTheRunEndsNormally) {
  TempDir dir;
  dir.write("step.yaml", recipe("{name: fixture_stop_request, at_step: 6}"));  // step 2 of epoch 2
  const auto step = testing::run_mixt({"run", "step.yaml", "output=step"}, dir.path());
  ASSERT_EQ(step.exit_code, 0) << step.output;
  EXPECT_THAT(step.output, HasSubstr("done: 6 optimizer steps (0 skipped)"));
  EXPECT_THAT(step.output, HasSubstr("; stopped early by fixture_stop_request: asked at step 6\n"));
  EXPECT_THAT(step.output, HasSubstr("test accuracy: "));
  const fs::path step_run = only_run_directory(dir.path() / "step" / "stop");
  EXPECT_TRUE(fs::exists(step_run / "checkpoints" / "interrupted"));
  EXPECT_EQ(read_checkpoint(step_run / "checkpoints" / "interrupted").header["global_step"], 6);
  ASSERT_EQ(stop_events(step_run).size(), 1u);
  EXPECT_EQ(stop_events(step_run)[0]["when"], "after_step");

  dir.write("epoch.yaml", recipe("{name: fixture_stop_request, at_epoch: 2}"));
  const auto epoch = testing::run_mixt({"run", "epoch.yaml", "output=epoch"}, dir.path());
  ASSERT_EQ(epoch.exit_code, 0) << epoch.output;
  EXPECT_THAT(epoch.output, HasSubstr("done: 8 optimizer steps (0 skipped)"));
  EXPECT_THAT(epoch.output, HasSubstr("; stopped early by fixture_stop_request: asked after epoch 2\n"));
  EXPECT_THAT(epoch.output, HasSubstr("test accuracy: "));
  const fs::path epoch_run = only_run_directory(dir.path() / "epoch" / "stop");
  EXPECT_EQ(fs::read_symlink(epoch_run / "checkpoints" / "last"), "epoch-0002");
  EXPECT_FALSE(fs::exists(epoch_run / "checkpoints" / "epoch-0003"));
  ASSERT_EQ(stop_events(epoch_run).size(), 1u);
  EXPECT_EQ(stop_events(epoch_run)[0]["epoch"], 2);
}

// The request on rank 1 only, after step 6 (mid-epoch 2) or after epoch 2's evaluation:
// both ranks stop at the same point, exit 0; rank 0, which never asked, reports rank 1's
// reason and writes the checkpoint.
TEST(StopRequestCli, ARequestOnOneRankStopsBothRanksAtTheSamePoint) {
  struct Case {
    std::string callback, reason, checkpoint;
    int steps;
  };
  for (const Case& c :
       {Case{"{name: fixture_stop_request, at_step: 6, rank: 1}", "asked at step 6", "interrupted", 6},
        Case{"{name: fixture_stop_request, at_epoch: 2, rank: 1}", "asked after epoch 2", "epoch-0002", 8}}) {
    SCOPED_TRACE(c.callback);
    TempDir dir;
    dir.write("r.yaml", recipe(c.callback));
    const int port = testing::free_port();
    std::vector<std::unique_ptr<testing::ChildProcess>> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(std::make_unique<testing::ChildProcess>(
          std::vector<std::string>{testing::configured::mixt_executable(), "run", "r.yaml", "data.train.batch_size=32"},
          testing::rank_environment(r, 2, port), dir.path(), dir.path() / ("rank" + std::to_string(r) + ".log")));
    }
    std::vector<std::string> logs;
    for (int r = 0; r < 2; ++r) {
      const auto code = ranks[static_cast<std::size_t>(r)]->wait_for(120);
      logs.push_back(testing::read_file(dir.path() / ("rank" + std::to_string(r) + ".log")));
      ASSERT_TRUE(code) << logs.back();
      EXPECT_EQ(*code, 0) << logs.back();
    }
    EXPECT_THAT(logs[0], HasSubstr("done: " + std::to_string(c.steps) + " optimizer steps (0 skipped)"));
    EXPECT_THAT(logs[0], HasSubstr("; stopped early by fixture_stop_request: " + c.reason + "\n"));
    EXPECT_THAT(logs[0], HasSubstr("test accuracy: "));
    const fs::path run = only_run_directory(dir.path() / "runs" / "stop");
    EXPECT_EQ(read_checkpoint(run / "checkpoints" / c.checkpoint).header["global_step"], c.steps);
    ASSERT_EQ(stop_events(run).size(), 1u);
    EXPECT_EQ(stop_events(run)[0]["step"], c.steps);
  }
}

// early_stopping and best_checkpoint from a recipe: the run ends early with exit 0, and
// `mixt export RUN --best` writes the best epoch's weights.
TEST(StopRequestCli, EarlyStoppingEndsARunAndExportBestReadsItsBestCheckpoint) {
  TempDir dir;
  // mode max on the falling loss: epoch 1 stays the best, epoch 2 is no improvement.
  dir.write("r.yaml", recipe("{name: early_stopping, mode: max, patience: 1}, {name: best_checkpoint, mode: max}"));
  const auto run = testing::run_mixt({"run", "r.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("; stopped early by early_stopping: val_loss did not improve for 1 epoch (best "));
  const fs::path run_dir = only_run_directory(dir.path() / "runs" / "stop");
  EXPECT_EQ(fs::read_symlink(run_dir / "checkpoints" / "best"), "best-epoch-0001");
  const auto exported = testing::run_mixt({"export", run_dir.string(), "--best", "-o", "best.safetensors"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("/checkpoints/best-epoch-0001 to best.safetensors"));
  const auto none = testing::run_mixt({"export", dir.path().string(), "--best", "-o", "x.safetensors"}, dir.path());
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_THAT(none.output, HasSubstr("no best checkpoint in"));
}

// `mixt evaluate RUN --best` scores the best epoch's weights (its figures are that epoch's,
// not the last one's), `mixt predict RUN --best` predicts with them, and
// trainer.resume=RUN/checkpoints/best goes on from the best epoch.
TEST(StopRequestCli, EvaluateAndResumeTakeTheBestCheckpoint) {
  TempDir dir;
  dir.write("r.yaml", recipe("{name: best_checkpoint, mode: max}"));  // max of a falling loss: epoch 1
  ASSERT_EQ(testing::run_mixt({"run", "r.yaml", "trainer.epochs=2"}, dir.path()).exit_code, 0);
  const fs::path run = only_run_directory(dir.path() / "runs" / "stop");
  ASSERT_EQ(fs::read_symlink(run / "checkpoints" / "best"), "best-epoch-0001");
  const auto scored = testing::run_mixt({"evaluate", run.string(), "--best", "--json"}, dir.path());
  ASSERT_EQ(scored.exit_code, 0) << scored.output;
  const auto start = scored.output.find("{\n");
  ASSERT_NE(start, std::string::npos) << scored.output;
  const nlohmann::json report =
      nlohmann::json::parse(scored.output.substr(start, scored.output.rfind('}') - start + 1));
  EXPECT_DOUBLE_EQ(report["loss"].get<double>(), epoch_event(run, 1)["val_loss"].get<double>());
  EXPECT_NE(report["loss"].get<double>(), epoch_event(run, 2)["val_loss"].get<double>());

  const auto file = testing::run_mixt({"evaluate", (run / "checkpoints" / "last").string(), "--best"}, dir.path());
  EXPECT_EQ(file.exit_code, 2) << file.output;
  EXPECT_THAT(file.output, HasSubstr("--best takes a run directory"));

  at::manual_seed(3);
  save_safetensors(dir.path() / "batch.safetensors", {{"input", at::randn({4, 1, 28, 28})}});
  const auto predict = [&](std::vector<std::string> args, const std::string& output) {
    args.insert(args.begin(), "predict");
    args.insert(args.end(), {"--input", "batch.safetensors", "--output", output});
    const auto predicted = testing::run_mixt(args, dir.path());
    EXPECT_EQ(predicted.exit_code, 0) << predicted.output;
    for (const auto& [name, tensor] : load_safetensors(dir.path() / output).tensors) {
      if (name == "output") return tensor;
    }
    ADD_FAILURE() << output << " has no tensor named output";
    return at::Tensor();
  };
  const at::Tensor best = predict({run.string(), "--best"}, "best.safetensors");
  EXPECT_TRUE(at::equal(best, predict({(run / "checkpoints" / "best-epoch-0001").string()}, "epoch1.safetensors")));
  EXPECT_FALSE(at::equal(best, predict({run.string()}, "newest.safetensors")));  // epoch 2's weights

  const auto resumed = testing::run_mixt(
      {"run", "r.yaml", "trainer.epochs=3", "trainer.resume=" + (run / "checkpoints" / "best").string()}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "stop")) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(read_checkpoint(runs[1] / "checkpoints" / "epoch-0002").header["global_step"], 8);
  EXPECT_EQ(epoch_event(runs[1], 2)["val_loss"], epoch_event(run, 2)["val_loss"]);  // the same epoch 2 again
}

}  // namespace
}  // namespace mixt
