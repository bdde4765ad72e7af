// End to end: `mixt evaluate` on a short real run gives the figures of that run's last
// evaluation (its metrics.jsonl), for the model's weights, the ema average and the exported
// safetensors alike; its per-class figures, CSV and heat map agree with them; bad input is
// a one-line usage error (exit 2).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "child_process.h"
#include "run_directories.h"
#include "shared_setup.h"
#include "test_support.h"

namespace mixt {
namespace {

// kTinyRecipe, one epoch of 256 images, with an ema average that differs from the weights.
const std::vector<std::string> kShortRun = {"data.train.limit=256", "trainer.epochs=1",
                                            "callbacks=[{name: ema, decay: 0.9}]"};

// One trained run, shared by the tests (training is the slow part); each case's files go to a
// directory of its own.
class EvaluateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    dir_->write("r.yaml", testing::kTinyRecipe);
    std::vector<std::string> args = {"run", "r.yaml"};
    args.insert(args.end(), kShortRun.begin(), kShortRun.end());
    const fs::path shared = testing::shared_mixt_command("evaluate_cli", "r.yaml", testing::kTinyRecipe, args);
    if (HasFatalFailure()) return;
    run_ = new fs::path(testing::only_run_directory(shared / "runs" / "tiny"));
    std::istringstream lines(testing::read_file(*run_ / "metrics.jsonl"));
    last_epoch_ = new nlohmann::json;
    for (std::string line; std::getline(lines, line);) {
      const auto event = nlohmann::json::parse(line);
      if (event["event"] == "epoch") *last_epoch_ = event;
    }
  }
  static void TearDownTestSuite() {
    delete last_epoch_;
    delete run_;
    delete dir_;
  }

  // `mixt evaluate ARGS --json`, its report parsed (warnings on stderr come before it).
  static nlohmann::json evaluate_json(std::vector<std::string> args) {
    args.insert(args.begin(), "evaluate");
    args.push_back("--json");
    const CommandResult result = run_mixt(args, dir_->path());
    EXPECT_EQ(result.exit_code, 0) << result.output;
    const auto start = result.output.find("{\n");
    if (start == std::string::npos) return {};
    return nlohmann::json::parse(result.output.substr(start, result.output.rfind('}') - start + 1));
  }

  static void expect_the_runs_figures(const nlohmann::json& report, const std::string& suffix) {
    EXPECT_EQ(report["samples"], 512);
    EXPECT_DOUBLE_EQ(report["loss"].get<double>(), (*last_epoch_)["val_loss" + suffix].get<double>());
    EXPECT_DOUBLE_EQ(report["top1"].get<double>(), (*last_epoch_)["val_top1" + suffix].get<double>());
    EXPECT_DOUBLE_EQ(report["top5"].get<double>(), (*last_epoch_)["val_top5" + suffix].get<double>());
  }

  static TempDir* dir_;
  static fs::path* run_;
  static nlohmann::json* last_epoch_;
};

TempDir* EvaluateCli::dir_ = nullptr;
fs::path* EvaluateCli::run_ = nullptr;
nlohmann::json* EvaluateCli::last_epoch_ = nullptr;

TEST_F(EvaluateCli, ACheckpointGivesTheFiguresOfTheRunsLastEvaluation) {
  ASSERT_TRUE(last_epoch_->contains("val_top1_ema")) << last_epoch_->dump();
  const nlohmann::json report = evaluate_json({run_->string()});
  expect_the_runs_figures(report, "");
  EXPECT_EQ(report["weights"], "model");
  // The checkpoint file itself, as `last` names it, is the same checkpoint.
  expect_the_runs_figures(evaluate_json({(*run_ / "checkpoints" / "last").string()}), "");
  // The ema average differs from the weights (decay 0.9), and is what val_*_ema scored.
  EXPECT_NE((*last_epoch_)["val_loss"], (*last_epoch_)["val_loss_ema"]);
  const nlohmann::json ema = evaluate_json({run_->string(), "--ema"});
  expect_the_runs_figures(ema, "_ema");
  EXPECT_EQ(ema["weights"], "ema");
}

TEST_F(EvaluateCli, ExportedWeightsGiveTheSameFigures) {
  const CommandResult exported = run_mixt({"export", run_->string(), "-o", "w.safetensors"}, dir_->path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::vector<std::string> args = {"r.yaml", "model.weights=w.safetensors"};
  args.insert(args.end(), kShortRun.begin(), kShortRun.end());
  expect_the_runs_figures(evaluate_json(args), "");
  // Under the run's own recipe: the weights named win over its checkpoint.
  const nlohmann::json with_run = evaluate_json({run_->string(), "model.weights=w.safetensors"});
  expect_the_runs_figures(with_run, "");
  EXPECT_EQ(with_run["source"], "w.safetensors");

  // A run that started from those weights is scored on its checkpoint, though the file it
  // started from is gone.
  TempDir fine_tune;
  fine_tune.write("r.yaml", testing::kTinyRecipe);
  fs::copy_file(dir_->path() / "w.safetensors", fine_tune.path() / "start.safetensors");
  const CommandResult run = run_mixt(
      {"run", "r.yaml", "model.weights=start.safetensors", "data.train.limit=128", "trainer.epochs=1"},
      fine_tune.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::remove(fine_tune.path() / "start.safetensors");
  const CommandResult again = run_mixt({"evaluate", "runs/tiny"}, fine_tune.path());
  EXPECT_EQ(again.exit_code, 2) << again.output;  // runs/tiny is no run directory: the hint names it
  EXPECT_THAT(again.output, HasSubstr("did you mean runs/tiny/"));
  fs::path fine_tuned;
  for (const auto& entry : fs::directory_iterator(fine_tune.path() / "runs" / "tiny")) fine_tuned = entry.path();
  const CommandResult scored = run_mixt({"evaluate", fine_tuned.string()}, fine_tune.path());
  EXPECT_EQ(scored.exit_code, 0) << scored.output;
  EXPECT_THAT(scored.output, HasSubstr("samples  512"));
}

TEST_F(EvaluateCli, AMasterWeightPolicysCheckpointGivesItsRunsFigures) {
  // bf16_master evaluates a bfloat16 model; the checkpoint's float32 masters round into it
  // as the policy rounds them after each step.
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  const CommandResult run = run_mixt(
      {"run", "r.yaml", "precision.name=bf16_master", "data.train.limit=128", "trainer.epochs=1"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "tiny")) run_dir = entry.path();
  std::istringstream lines(testing::read_file(run_dir / "metrics.jsonl"));
  nlohmann::json epoch;
  for (std::string line; std::getline(lines, line);) {
    if (const auto event = nlohmann::json::parse(line); event["event"] == "epoch") epoch = event;
  }
  const CommandResult evaluated = run_mixt({"evaluate", run_dir.string(), "--json"}, dir.path());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const auto report = nlohmann::json::parse(evaluated.output.substr(evaluated.output.find("{\n")));
  EXPECT_EQ(report["precision"], "bf16_master");
  EXPECT_DOUBLE_EQ(report["loss"].get<double>(), epoch["val_loss"].get<double>());
  EXPECT_DOUBLE_EQ(report["top1"].get<double>(), epoch["val_top1"].get<double>());
}

TEST_F(EvaluateCli, PerClassFiguresAndTheMatrixAgreeWithTheTotals) {
  const nlohmann::json report = evaluate_json({run_->string()});
  const auto& matrix = report["confusion"];
  ASSERT_EQ(matrix.size(), 10u);
  std::int64_t samples = 0, diagonal = 0;
  for (std::size_t i = 0; i < matrix.size(); ++i) {
    std::int64_t row = 0;
    for (const auto& count : matrix[i]) row += count.get<std::int64_t>();
    samples += row;
    diagonal += matrix[i][i].get<std::int64_t>();
    EXPECT_EQ(report["per_class"][i]["samples"], row);
    EXPECT_EQ(report["per_class"][i]["correct"], matrix[i][i]);
  }
  EXPECT_EQ(samples, 512);
  EXPECT_DOUBLE_EQ(static_cast<double>(diagonal) / 512.0, report["top1"].get<double>());
  // Names from the run's classes.txt.
  EXPECT_EQ(report["per_class"][0]["class"], "T-shirt/top");
  EXPECT_EQ(report["per_class"][9]["class"], "Ankle boot");

  const CommandResult text = run_mixt(
      {"evaluate", run_->string(), "--per-class", "--confusion", "m.csv", "--confusion-png", "m.png"}, dir_->path());
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("on data.val, precision fp32\n  samples  512\n"));
  EXPECT_THAT(text.output, HasSubstr("per-class top-1 accuracy:"));
  EXPECT_THAT(text.output, HasSubstr("  Ankle boot "));
  const std::string csv = testing::read_file(dir_->path() / "m.csv");
  EXPECT_THAT(csv, HasSubstr("label \\ predicted,T-shirt/top,Trouser,"));
  std::string first_row = "T-shirt/top";
  for (const auto& count : matrix[0]) first_row += "," + std::to_string(count.get<std::int64_t>());
  EXPECT_THAT(csv, HasSubstr("\n" + first_row + "\n"));
  EXPECT_EQ(testing::read_file(dir_->path() / "m.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(EvaluateCli, AnotherSplitOrPolicyIsScoredOnRequest) {
  const nlohmann::json train = evaluate_json({run_->string(), "--split", "train"});
  EXPECT_EQ(train["split"], "train");
  EXPECT_EQ(train["samples"], 256);
  const nlohmann::json bf16 = evaluate_json({run_->string(), "--precision", "amp_bf16"});
  EXPECT_EQ(bf16["precision"], "amp_bf16");
  EXPECT_EQ(bf16["samples"], 512);
}

TEST_F(EvaluateCli, CtrlCStopsTheEvaluationWithExit130) {
  // 10,000 samples one at a time: seconds of evaluation to interrupt.
  testing::ChildProcess child({testing::configured::mixt_executable(), "evaluate", run_->string(),
                               "data.val.limit=10000", "data.val.batch_size=1"},
                              {}, dir_->path(), dir_->path() / "interrupted.txt");
  const auto said = [&] { return testing::read_file(dir_->path() / "interrupted.txt"); };
  for (int i = 0; i < 3000 && said().find("10000 samples of data.val") == std::string::npos; ++i) {
    ASSERT_FALSE(child.wait_for(0.01)) << said();
  }
  child.signal(SIGINT);
  EXPECT_EQ(child.wait_for(60), 130) << said();
  EXPECT_THAT(said(), HasSubstr("mixt: interrupted during the evaluation"));
  EXPECT_THAT(said(), Not(HasSubstr("top-1")));
}

TEST_F(EvaluateCli, BadInputIsAOneLineUsageError) {
  const auto expect_usage_error = [&](const std::vector<std::string>& args, const std::string& message) {
    const CommandResult result = run_mixt(args, dir_->path());
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr("mixt: error: " + message));
    EXPECT_THAT(result.output, Not(HasSubstr("LibTorch")));
    EXPECT_THAT(result.output, Not(HasSubstr("what()")));
  };
  expect_usage_error({"evaluate", "missing/run"}, "missing/run: no such file or directory\n  hint: name a recipe");
  expect_usage_error({"evaluate", run_->string(), "--split", "test"},
                     "--split test: the recipe has no data.test section\n  hint: its data sections are train, val");
  dir_->write("notes.txt", "not a checkpoint");
  expect_usage_error({"evaluate", "notes.txt"}, "notes.txt is neither a recipe (.yaml) nor a mixt checkpoint");
  expect_usage_error({"evaluate", "r.yaml", "--ema"}, "--ema reads the ema callback's average from a checkpoint");
  expect_usage_error({"evaluate", run_->string(), "--ema", "model.weights=w.safetensors"},
                     "--ema reads the ema callback's average from a checkpoint, not from model.weights");
  expect_usage_error({"evaluate", run_->string(), "--confusion", "no/such/dir/m.csv"}, "--confusion no/such/dir/m.csv");
  expect_usage_error({"evaluate", run_->string(), "--precision", "fp64"}, "");
  expect_usage_error({"evaluate", run_->string(), "model.channels=[4, 8]"}, "");
}

}  // namespace
}  // namespace mixt
