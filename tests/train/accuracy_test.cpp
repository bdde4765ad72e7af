// The classification task's top-1 and top-k against torchvision's reference accuracy() on
// recorded logits (goldens: tests/golden/make_top_k_golden.py), ties included.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "plugins.h"

namespace mixt {
namespace {

at::Tensor from_json(const nlohmann::json& rows) {
  std::vector<float> values;
  for (const auto& row : rows) {
    for (const auto& v : row) values.push_back(v.get<float>());
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  return at::tensor(values).view({n, -1});
}

TEST(Accuracy, TopOneAndTopKCountAsTorchvisionsReference) {
  const testing::BuiltPlugins plugins;
  const auto golden = nlohmann::json::parse(
      testing::read_file(testing::configured::source_dir() + "/tests/golden/top_k_accuracy.json"));
  ASSERT_EQ(golden["cases"].size(), 3u);
  for (const auto& c : golden["cases"]) {
    const at::Tensor logits = from_json(c["logits"]);
    const at::Tensor labels = at::tensor(c["labels"].get<std::vector<std::int64_t>>());
    const auto task = plugins.registry.make_task(Config(parse_yaml("{name: classification}", "t"), "task"),
                                                 TaskContext{at::kCPU, logits.size(1)});
    const auto score = task->start_evaluation(false);
    // Two batches: the counts add up across them.
    const std::int64_t half = logits.size(0) / 2;
    score->add(logits.slice(0, 0, half), labels.slice(0, 0, half));
    score->add(logits.slice(0, half), labels.slice(0, half));
    const std::vector<Figure> figures = score->finish(score->totals());
    ASSERT_EQ(figures.size(), 2u);
    const auto samples = static_cast<double>(logits.size(0));
    EXPECT_EQ(figures[1].name, "top" + std::to_string(c["k"].get<std::int64_t>())) << c["name"];
    EXPECT_EQ(figures[0].value * samples, c["top1"].get<double>()) << c["name"];
    EXPECT_EQ(figures[1].value * samples, c["topk"].get<double>()) << c["name"];
  }
}

}  // namespace
}  // namespace mixt
