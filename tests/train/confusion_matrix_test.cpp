// The classification task's confusion matrix and per-class accuracy against a hand
// computation in numpy on recorded logits (tests/golden/make_confusion_golden.py), and the
// matrix its evaluation accumulates over batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "plugins.h"
#include "test_support.h"

namespace mixt {
namespace {

struct Golden {
  at::Tensor logits, labels, confusion;
  nlohmann::json json;
};

Golden read_golden() {
  Golden g;
  g.json = nlohmann::json::parse(
      testing::read_file(testing::configured::source_dir() + "/tests/golden/confusion_matrix.json"));
  std::vector<float> values;
  for (const auto& row : g.json["logits"]) {
    for (const auto& v : row) values.push_back(v.get<float>());
  }
  const std::int64_t classes = g.json["classes"].get<std::int64_t>();
  g.logits = at::tensor(values).view({-1, classes});
  g.labels = at::tensor(g.json["labels"].get<std::vector<std::int64_t>>());
  std::vector<std::int64_t> cells;
  for (const auto& row : g.json["confusion"]) {
    for (const auto& v : row) cells.push_back(v.get<std::int64_t>());
  }
  g.confusion = at::tensor(cells).view({classes, classes});
  return g;
}

// The task's matrix after `batch`-sample batches of the recorded logits.
at::Tensor evaluated_confusion(const Golden& g, std::int64_t batch) {
  const testing::BuiltPlugins plugins;
  const auto score = plugins.classification()->start_evaluation(/*confusion=*/true);
  for (std::int64_t start = 0; start < g.logits.size(0); start += batch) {
    const std::int64_t end = std::min(start + batch, g.logits.size(0));
    score->add(g.logits.slice(0, start, end), g.labels.slice(0, start, end));
  }
  return score->confusion();
}

TEST(ConfusionMatrix, EqualsTheHandComputationOnRecordedLogits) {
  const Golden g = read_golden();
  const at::Tensor confusion = evaluated_confusion(g, g.logits.size(0));
  EXPECT_TRUE(at::equal(confusion, g.confusion)) << confusion << "\nexpected\n" << g.confusion;
}

TEST(ConfusionMatrix, SummedOverBatchesEqualsTheWholeSet) {
  const Golden g = read_golden();
  const at::Tensor summed = evaluated_confusion(g, 16);  // 16, 16, 16, 5: as a loader's batches
  EXPECT_TRUE(at::equal(summed, g.confusion));
}

TEST(ConfusionMatrix, PerClassAccuracyEqualsTheHandComputation) {
  const Golden g = read_golden();
  const testing::BuiltPlugins plugins;
  const std::vector<ClassFigure> columns = plugins.classification()->per_class(g.confusion);
  ASSERT_EQ(columns.size(), 1u);
  EXPECT_EQ(columns[0].name, "accuracy");
  const std::vector<double>& accuracy = columns[0].values;
  const auto& expected = g.json["per_class_accuracy"];
  ASSERT_EQ(accuracy.size(), expected.size());
  for (std::size_t i = 0; i < accuracy.size(); ++i) {
    if (expected[i].is_null()) {
      EXPECT_TRUE(std::isnan(accuracy[i])) << "class " << i << " has no sample: " << accuracy[i];
    } else {
      EXPECT_DOUBLE_EQ(accuracy[i], expected[i].get<double>()) << "class " << i;
    }
  }
}

TEST(ConfusionMatrix, ItsDiagonalIsTheTop1Count) {
  const Golden g = read_golden();
  const testing::BuiltPlugins plugins;
  const auto score = plugins.classification()->start_evaluation(false);
  score->add(g.logits, g.labels);
  const double top1 = score->finish(score->totals())[0].value * static_cast<double>(g.logits.size(0));
  EXPECT_EQ(static_cast<double>(g.confusion.diagonal().sum().item<std::int64_t>()), top1);
}

TEST(ConfusionMatrix, IsKeptOnlyWhenAskedFor) {
  const Golden g = read_golden();
  const testing::BuiltPlugins plugins;
  const auto score = plugins.classification()->start_evaluation(/*confusion=*/false);
  score->add(g.logits, g.labels);
  EXPECT_FALSE(score->confusion().defined());
}

}  // namespace
}  // namespace mixt
