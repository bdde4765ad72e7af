// The segmentation task against PyTorch and torchvision's segmentation reference: the
// training loss (F.cross_entropy with ignore_index 255, with and without label smoothing),
// and over an evaluation of two batches the pixels' confusion matrix, the loss per counted
// pixel, the pixel accuracy, per-class IoU and their mean over the classes seen (goldens:
// tests/golden/make_segmentation_golden.py). And what the framework asks of it: pixels for
// speed, a per-class table, the shapes it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "nested_json_tensor.h"
#include "plugins.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::nested_json_tensor;

std::unique_ptr<Task> segmentation(const testing::BuiltPlugins& plugins, const std::string& options = "") {
  return plugins.registry.make_task(Config(parse_yaml("{name: segmentation" + options + "}", "t"), "task"),
                                    TaskContext{at::kCPU, 5});
}

const nlohmann::json& golden() {
  static const nlohmann::json g =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/segmentation.json"));
  return g;
}

TEST(Segmentation, TrainingLossIsTorchvisionsCrossEntropyWithIgnoredPixels) {
  const testing::BuiltPlugins plugins;
  const auto plain = segmentation(plugins), smoothed = segmentation(plugins, ", label_smoothing: 0.1");
  for (const auto& batch : golden()["batches"]) {
    const at::Tensor logits = nested_json_tensor(batch["logits"], at::kFloat);
    const at::Tensor targets = nested_json_tensor(batch["targets"], at::kLong);
    EXPECT_FLOAT_EQ(plain->loss(logits, targets).item<float>(), batch["loss"].get<float>());
    EXPECT_FLOAT_EQ(smoothed->loss(logits, targets).item<float>(), batch["loss_smoothed_0.1"].get<float>());
  }
}

TEST(Segmentation, AnEvaluationGivesTheReferencesConfusionMatrixIouAndPixelAccuracy) {
  const testing::BuiltPlugins plugins;
  const auto task = segmentation(plugins);
  const auto score = task->start_evaluation(/*confusion=*/true);
  for (const auto& batch : golden()["batches"]) {
    score->add(nested_json_tensor(batch["logits"], at::kFloat), nested_json_tensor(batch["targets"], at::kLong));
  }
  const at::Tensor confusion = score->confusion();
  ASSERT_TRUE(confusion.defined());
  EXPECT_TRUE(at::equal(confusion, nested_json_tensor(golden()["confusion"], at::kLong))) << confusion;

  const std::vector<double> totals = score->totals();
  EXPECT_NEAR(score->loss(totals), golden()["evaluation_loss"].get<double>(), 1e-6);
  const std::vector<Figure> figures = score->finish(totals);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "miou");
  EXPECT_DOUBLE_EQ(figures[0].value, golden()["miou"].get<double>());
  EXPECT_EQ(figures[1].name, "pixel_accuracy");
  EXPECT_DOUBLE_EQ(figures[1].value, golden()["pixel_accuracy"].get<double>());

  const std::vector<ClassFigure> columns = task->per_class(confusion);
  ASSERT_EQ(columns.size(), 1u);
  EXPECT_EQ(columns[0].name, "iou");
  const auto& expected = golden()["iou"];
  ASSERT_EQ(columns[0].values.size(), expected.size());
  for (std::size_t c = 0; c < expected.size(); ++c) {
    if (expected[c].is_null()) {
      EXPECT_TRUE(std::isnan(columns[0].values[c])) << "class " << c << " is in neither targets nor predictions";
    } else {
      EXPECT_DOUBLE_EQ(columns[0].values[c], expected[c].get<double>()) << "class " << c;
    }
  }
}

TEST(Segmentation, CountsPixelsAndTakesOnlyPerPixelLogitsOfTheImagesSize) {
  const testing::BuiltPlugins plugins;
  const auto task = segmentation(plugins);
  const std::optional<Throughput> rate = task->throughput({3, 64, 48});
  ASSERT_TRUE(rate.has_value());
  EXPECT_EQ(rate->unit, "pixels");
  EXPECT_EQ(rate->per_sample, 64 * 48);
  EXPECT_FALSE(task->predicts_next_token());
  EXPECT_EQ(task->output_problem({2, 5, 64, 48}, {2, 3, 64, 48}, 5), "");
  EXPECT_THAT(task->output_problem({2, 5, 8, 6}, {2, 3, 64, 48}, 5), HasSubstr("expected [2, 5, 64, 48]"));
  EXPECT_THAT(task->output_problem({2, 5}, {2, 3, 64, 48}, 5), HasSubstr("upsample the logits"));
  EXPECT_THAT(task->output_problem({2, 5}, {2, 8}, 5), HasSubstr("takes images"));
}

}  // namespace
}  // namespace mixt
