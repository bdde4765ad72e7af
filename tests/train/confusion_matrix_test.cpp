// The confusion matrix and per-class accuracy of an evaluation against a hand computation
// in numpy on recorded logits (tests/golden/make_confusion_golden.py), and the matrix the
// trainer's evaluation accumulates over batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "plugins.h"
#include "train/confusion_matrix.h"

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

TEST(ConfusionMatrix, EqualsTheHandComputationOnRecordedLogits) {
  const Golden g = read_golden();
  const at::Tensor confusion = confusion_counts(g.logits, g.labels, g.logits.size(1));
  EXPECT_TRUE(at::equal(confusion, g.confusion)) << confusion << "\nexpected\n" << g.confusion;
}

TEST(ConfusionMatrix, SummedOverBatchesEqualsTheWholeSet) {
  const Golden g = read_golden();
  at::Tensor summed = at::zeros({g.logits.size(1), g.logits.size(1)}, at::kLong);
  for (std::int64_t start = 0; start < g.logits.size(0); start += 16) {  // 16, 16, 16, 5: as a loader's batches
    const std::int64_t end = std::min(start + 16, g.logits.size(0));
    summed += confusion_counts(g.logits.slice(0, start, end), g.labels.slice(0, start, end), g.logits.size(1));
  }
  EXPECT_TRUE(at::equal(summed, g.confusion));
}

TEST(ConfusionMatrix, PerClassAccuracyEqualsTheHandComputation) {
  const Golden g = read_golden();
  const std::vector<double> accuracy = per_class_accuracy(g.confusion);
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
  const auto score = plugins.classification()->start_evaluation();
  score->add(g.logits, g.labels);
  const double top1 = score->finish(score->totals())[0].value * static_cast<double>(g.logits.size(0));
  EXPECT_EQ(static_cast<double>(g.confusion.diagonal().sum().item<std::int64_t>()), top1);
}

}  // namespace
}  // namespace mixt
