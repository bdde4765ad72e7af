// End to end: `mixt lr-find` on the Fashion-MNIST tiny recipe suggests a learning rate with
// which a one-epoch run trains, leaves the recipe's initial weights and every checkpoint as
// they were (writing only its curve), plots exactly the curve its JSON holds, and rejects bad
// flags as usage errors (exit 2).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "run_directories.h"
#include "test_support.h"

#ifdef MIXT_TEST_OPENCV
#include <opencv2/imgcodecs.hpp>
#endif

namespace mixt {
namespace {

std::set<fs::path> files_under(const fs::path& dir) {
  std::set<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files.insert(fs::relative(entry.path(), dir));
  }
  return files;
}

// The value after "suggested: optimizer.lr=" in the command's output.
std::string suggested_override(const std::string& output) {
  const std::string marker = "suggested: ";
  const auto at = output.find(marker);
  if (at == std::string::npos) return "";
  return output.substr(at + marker.size(), output.find('\n', at) - at - marker.size());
}

// One range test on the untrained model (60 steps), shared by the tests.
class LrFindCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    dir_->write("r.yaml", testing::kTinyRecipe);
    result_ = new CommandResult(
        run_mixt({"lr-find", "r.yaml", "--steps", "60", "--json", "curve.json", "--png", "curve.png"}, dir_->path()));
    curve_ = new nlohmann::json;
    if (result_->exit_code == 0) *curve_ = nlohmann::json::parse(testing::read_file(dir_->path() / "curve.json"));
  }
  static void TearDownTestSuite() {
    delete curve_;
    delete result_;
    delete dir_;
  }
  void SetUp() override { ASSERT_EQ(result_->exit_code, 0) << result_->output; }

  static TempDir* dir_;
  static CommandResult* result_;
  static nlohmann::json* curve_;
};

TempDir* LrFindCli::dir_ = nullptr;
CommandResult* LrFindCli::result_ = nullptr;
nlohmann::json* LrFindCli::curve_ = nullptr;

TEST_F(LrFindCli, SuggestsALearningRateWithWhichAOneEpochRunTrains) {
  const nlohmann::json& c = *curve_;
  ASSERT_FALSE(c["suggestion"].is_null()) << c.dump(1);
  const double lr = c["suggestion"]["lr"].get<double>();
  EXPECT_GT(lr, 1e-7);
  EXPECT_LT(lr, 10.0);
  const std::string override_ = suggested_override(result_->output);
  EXPECT_EQ(override_, c["suggestion"]["override"].get<std::string>()) << result_->output;
  ASSERT_THAT(override_, ::testing::StartsWith("optimizer.lr="));
  // The ramp: geometric in the applied steps, from --min.
  const auto& points = c["points"];
  ASSERT_GE(points.size(), 12u);
  EXPECT_DOUBLE_EQ(points[0]["lr"].get<double>(), 1e-7);
  EXPECT_NEAR(points[1]["lr"].get<double>() / points[0]["lr"].get<double>(), std::pow(1e8, 1.0 / 59), 1e-9);

  // A one-epoch run (16 steps) with it learns: below the untrained loss and well above chance.
  const CommandResult run = run_mixt({"run", "r.yaml", override_, "trainer.epochs=1", "output=trained"}, dir_->path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path run_dir = testing::only_run_directory(dir_->path() / "trained" / "tiny");
  std::istringstream lines(testing::read_file(run_dir / "metrics.jsonl"));
  nlohmann::json epoch;
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "epoch") epoch = event;
  }
  ASSERT_TRUE(epoch.contains("val_top1")) << run.output;
  EXPECT_GT(epoch["val_top1"].get<double>(), 0.2) << run.output;             // 10 classes: chance is 0.1
  EXPECT_LT(epoch["val_loss"].get<double>(), std::log(10.0)) << run.output;  // the untrained loss
}

TEST_F(LrFindCli, LeavesTheInitialWeightsAndWritesNoCheckpoint) {
  // Trained weights as the recipe's start: a short run, exported.
  const CommandResult run = run_mixt({"run", "r.yaml", "trainer.epochs=1", "output=start"}, dir_->path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path run_dir = testing::only_run_directory(dir_->path() / "start" / "tiny");
  const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", "w.safetensors"}, dir_->path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string weights = testing::read_file(dir_->path() / "w.safetensors");
  const std::set<fs::path> before = files_under(dir_->path());

  // No --json: the curve goes to <output>/lr-find/<name>.json, which the command names. A
  // recipe's trainer.resume is not silently dropped: it is said not to be used.
  const CommandResult found = run_mixt(
      {"lr-find", "r.yaml", "model.weights=w.safetensors", "trainer.resume=" + run_dir.string(), "--steps", "20"},
      dir_->path());
  ASSERT_EQ(found.exit_code, 0) << found.output;
  EXPECT_THAT(found.output, HasSubstr("curve: runs/lr-find/tiny.json"));
  EXPECT_THAT(found.output, HasSubstr("mixt: warning: trainer.resume is not used by the range test"));
  EXPECT_EQ(testing::read_file(dir_->path() / "w.safetensors"), weights);  // byte for byte
  std::set<fs::path> after = files_under(dir_->path());
  EXPECT_EQ(after.erase("runs/lr-find/tiny.json"), 1u);
  EXPECT_EQ(after, before);  // nothing else: no run directory, no checkpoint

  // It started from those weights: its first loss is the trained model's, not the untrained one's.
  const auto curve = nlohmann::json::parse(testing::read_file(dir_->path() / "runs/lr-find/tiny.json"));
  const double trained_first = curve["points"][0]["loss"].get<double>();
  const double untrained_first = (*curve_)["points"][0]["loss"].get<double>();
  EXPECT_LT(trained_first, untrained_first - 0.5) << trained_first << " vs " << untrained_first;
}

#ifdef MIXT_TEST_OPENCV
// The PNG read back: every plotted point of the JSON maps (through its "plot" frame) onto a
// pixel of the curve's colour, every such pixel lies on the JSON's polyline, and the marker
// is drawn at the suggested point alone.
TEST_F(LrFindCli, ThePngPlotsTheCurveTheJsonHolds) {
  const nlohmann::json& c = *curve_;
  const cv::Mat image = cv::imread((dir_->path() / "curve.png").string(), cv::IMREAD_COLOR);
  ASSERT_FALSE(image.empty());
  const auto& f = c["plot"];
  ASSERT_EQ(image.cols, f["width"].get<int>());
  ASSERT_EQ(image.rows, f["height"].get<int>());
  const auto map = [&](double lr, double loss) {
    const double x = f["left"].get<double>() + (std::log10(lr) - f["log10_lr_min"].get<double>()) /
                                                   (f["log10_lr_max"].get<double>() - f["log10_lr_min"].get<double>()) *
                                                   (f["right"].get<double>() - f["left"].get<double>());
    const double y = f["bottom"].get<double>() - (loss - f["loss_min"].get<double>()) /
                                                     (f["loss_max"].get<double>() - f["loss_min"].get<double>()) *
                                                     (f["bottom"].get<double>() - f["top"].get<double>());
    return cv::Point2d(x, y);
  };
  std::vector<cv::Point2d> line;
  for (const auto& p : c["points"]) {
    if (!p["plotted"].get<bool>()) continue;
    EXPECT_FALSE(p.contains("skipped") || p["smoothed_loss"].is_null()) << p.dump();
    line.push_back(map(p["lr"].get<double>(), p["smoothed_loss"].get<double>()));
  }
  ASSERT_GE(line.size(), 12u);
  const auto is = [&](int x, int y, const cv::Vec3b& colour) {
    return x >= 0 && y >= 0 && x < image.cols && y < image.rows && image.at<cv::Vec3b>(y, x) == colour;
  };
  const cv::Vec3b curve(180, 119, 31), marker(40, 39, 214);
  const auto near = [&](cv::Point2d at, const cv::Vec3b& colour, int radius) {
    for (int dy = -radius; dy <= radius; ++dy) {
      for (int dx = -radius; dx <= radius; ++dx) {
        if (is(static_cast<int>(std::lround(at.x)) + dx, static_cast<int>(std::lround(at.y)) + dy, colour)) return true;
      }
    }
    return false;
  };
  for (std::size_t i = 0; i < line.size(); ++i) EXPECT_TRUE(near(line[i], curve, 1)) << "point " << i;
  const auto distance_to_line = [&](cv::Point2d q) {
    double best = 1e9;
    for (std::size_t i = 0; i + 1 < line.size(); ++i) {
      const cv::Point2d a = line[i], d = line[i + 1] - line[i];
      const double t = std::clamp((q - a).dot(d) / std::max(d.dot(d), 1e-12), 0.0, 1.0);
      best = std::min(best, cv::norm(q - (a + t * d)));
    }
    return best;
  };
  std::int64_t curve_pixels = 0, off_curve = 0, marker_pixels = 0, marker_astray = 0;
  ASSERT_FALSE(c["suggestion"].is_null());
  const cv::Point2d suggested =
      map(c["suggestion"]["lr"].get<double>(), c["suggestion"]["smoothed_loss"].get<double>());
  for (int y = 0; y < image.rows; ++y) {
    for (int x = 0; x < image.cols; ++x) {
      if (is(x, y, curve)) {
        ++curve_pixels;
        off_curve += distance_to_line({static_cast<double>(x), static_cast<double>(y)}) > 2.5;
      } else if (is(x, y, marker)) {
        ++marker_pixels;
        marker_astray += cv::norm(cv::Point2d(x, y) - suggested) > 9.0;
      }
    }
  }
  EXPECT_GT(curve_pixels, static_cast<std::int64_t>(line.size()));
  EXPECT_EQ(off_curve, 0) << "of " << curve_pixels << " curve pixels";
  EXPECT_GT(marker_pixels, 20);
  EXPECT_EQ(marker_astray, 0);
}
#endif

// amp_fp16's loss scaler skips steps on the CPU (its first scale overflows float16 here):
// they are in the JSON as skipped, take no ramp step (the ramp still has --steps applied
// ones) and are not plotted.
TEST(LrFindPolicies, StepsALossScalerSkipsAreCountedAndNotPlotted) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  const CommandResult result =
      run_mixt({"lr-find", "r.yaml", "precision={name: amp_fp16}", "--steps", "20", "--json", "c.json"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto curve = nlohmann::json::parse(testing::read_file(dir.path() / "c.json"));
  EXPECT_EQ(curve["precision"], "amp_fp16");
  std::int64_t skipped = 0, applied = 0;
  double previous_lr = 0;
  for (const auto& p : curve["points"]) {
    const bool was_skipped = p.value("skipped", false);
    skipped += was_skipped;
    applied += !was_skipped;
    if (was_skipped) {
      EXPECT_FALSE(p["plotted"].get<bool>()) << p.dump();
    }
    EXPECT_GE(p["lr"].get<double>(), previous_lr);
    previous_lr = p["lr"].get<double>();
  }
  ASSERT_GT(skipped, 0) << "amp_fp16 skipped no step: the test no longer covers skipped steps\n" << result.output;
  EXPECT_EQ(curve["skipped"].get<std::int64_t>(), skipped);
  EXPECT_EQ(applied, 20);
  EXPECT_EQ(curve["applied"].get<std::int64_t>(), 20);
  EXPECT_THAT(result.output, HasSubstr("(" + std::to_string(skipped) + " skipped)"));
}

// Under torchrun every rank runs the ramp on its shard, the loss averaged over them; rank 0
// alone writes the curve and prints.
TEST(LrFindDistributed, TwoRanksStepTogetherAndRankZeroWrites) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  const int port = testing::free_port();
  std::vector<std::unique_ptr<testing::ChildProcess>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{testing::configured::mixt_executable(), "lr-find", "r.yaml", "--steps", "20", "--json",
                                 "curve" + std::to_string(r) + ".json",
                                 "trainer.distributed={backend: gloo, timeout: 30}"},
        testing::rank_environment(r, 2, port), dir.path(), dir.path() / ("rank" + std::to_string(r) + ".log")));
  }
  for (int r = 0; r < 2; ++r) {
    const std::optional<int> code = ranks[static_cast<std::size_t>(r)]->wait_for(120);
    EXPECT_EQ(code, std::optional<int>(0)) << testing::read_file(dir.path() / ("rank" + std::to_string(r) + ".log"));
  }
  const std::string rank0 = testing::read_file(dir.path() / "rank0.log");
  const std::string rank1 = testing::read_file(dir.path() / "rank1.log");
  EXPECT_THAT(rank0, HasSubstr("2 ranks"));
  EXPECT_THAT(rank0, HasSubstr("suggested: optimizer.lr="));
  EXPECT_THAT(rank1, Not(HasSubstr("suggested:")));
  EXPECT_FALSE(fs::exists(dir.path() / "curve1.json"));
  const auto curve = nlohmann::json::parse(testing::read_file(dir.path() / "curve0.json"));
  EXPECT_EQ(curve["applied"], 20);
}

// Ctrl-C stops the test after the step under way: exit 130, no curve written.
TEST(LrFindSignals, CtrlCExits130AndWritesNothing) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  testing::ChildProcess child(
      {testing::configured::mixt_executable(), "lr-find", "r.yaml", "--steps", "100000", "--max", "1e-3"}, {},
      dir.path(), dir.path() / "log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::read_file(dir.path() / "log").find("step   20") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  child.signal(SIGINT);
  EXPECT_EQ(child.wait_for(60), std::optional<int>(130)) << testing::read_file(dir.path() / "log");
  EXPECT_THAT(testing::read_file(dir.path() / "log"), HasSubstr("mixt: interrupted"));
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

TEST(LrFindUsage, BadFlagsAreUsageErrors) {
  TempDir dir;
  dir.write("r.yaml", testing::kTinyRecipe);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"lr-find", "r.yaml", "--no-such-flag"},
                                             {"lr-find", "r.yaml", "--steps", "1"},
                                             {"lr-find", "r.yaml", "--min", "0"},
                                             {"lr-find", "r.yaml", "--min", "1e-2", "--max", "1e-3"},
                                             {"lr-find", "r.yaml", "--steps", "many"},
                                             {"lr-find", "r.yaml", "--json", "no/such/dir/curve.json"},
                                             {"lr-find", "r.yaml", "--png", "curve.txt"},
                                             {"lr-find"}}) {
    const CommandResult result = run_mixt(args, dir.path());
    EXPECT_EQ(result.exit_code, 2) << ::testing::PrintToString(args) << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr("mixt: error: ")) << ::testing::PrintToString(args);
  }
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));  // nothing ran
}

}  // namespace
}  // namespace mixt
