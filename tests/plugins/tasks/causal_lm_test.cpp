// The causal_lm task against PyTorch: nanoGPT's training loss (F.cross_entropy over the
// flattened positions, with and without label smoothing) and an evaluation's loss per token
// and perplexity over two batches (goldens: tests/golden/make_causal_lm_golden.py). And
// what it refuses: a model whose output is not [batch, time, vocab], data that is not tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "plugins.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

at::Tensor tensor_of(const nlohmann::json& nested, at::ScalarType type) {
  std::vector<double> values;
  std::vector<std::int64_t> shape;
  std::function<void(const nlohmann::json&, std::size_t)> walk = [&](const nlohmann::json& node, std::size_t depth) {
    if (!node.is_array()) {
      values.push_back(node.get<double>());
      return;
    }
    if (shape.size() == depth) shape.push_back(static_cast<std::int64_t>(node.size()));
    for (const auto& item : node) walk(item, depth + 1);
  };
  walk(nested, 0);
  return at::tensor(values, at::kDouble).view(shape).to(type);
}

std::unique_ptr<Task> causal_lm(const testing::BuiltPlugins& plugins, double label_smoothing = 0) {
  return plugins.registry.make_task(Config(parse_yaml("{name: causal_lm}", "t"), "task"),
                                    TaskContext{at::kCPU, 11, label_smoothing});
}

const nlohmann::json& golden() {
  static const nlohmann::json g =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/causal_lm.json"));
  return g;
}

TEST(CausalLm, TrainingLossIsNanoGptsCrossEntropyOverEveryPosition) {
  const testing::BuiltPlugins plugins;
  const auto plain = causal_lm(plugins), smoothed = causal_lm(plugins, 0.1);
  for (const auto& batch : golden()["batches"]) {
    const at::Tensor logits = tensor_of(batch["logits"], at::kFloat);
    const at::Tensor targets = tensor_of(batch["targets"], at::kLong);
    EXPECT_FLOAT_EQ(plain->loss(logits, targets).item<float>(), batch["loss"].get<float>());
    EXPECT_FLOAT_EQ(smoothed->loss(logits, targets).item<float>(), batch["loss_smoothed_0.1"].get<float>());
  }
}

TEST(CausalLm, AnEvaluationReportsTheLossPerTokenAndItsPerplexity) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  const auto score = task->start_evaluation();
  for (const auto& batch : golden()["batches"]) {
    score->add(tensor_of(batch["logits"], at::kFloat), tensor_of(batch["targets"], at::kLong));
  }
  const std::vector<double> totals = score->totals();
  EXPECT_NEAR(score->loss(totals), golden()["evaluation_loss"].get<double>(), 1e-6);
  const std::vector<Figure> figures = score->finish(totals);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].name, "perplexity");
  EXPECT_FALSE(figures[0].higher_is_better);
  EXPECT_NEAR(figures[0].value, golden()["evaluation_perplexity"].get<double>(), 1e-5);
  EXPECT_EQ(task->prediction_unit(), "token");
}

TEST(CausalLm, BlankInputsAreTokenIdsAndOnlyBatchTimeVocabOutputsFit) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  const at::Tensor blank = task->blank_inputs({2, 8}, at::kCPU);
  EXPECT_EQ(blank.scalar_type(), at::kLong);
  EXPECT_EQ(blank.sizes(), at::IntArrayRef({2, 8}));
  EXPECT_EQ(task->output_problem({2, 8, 11}, {2, 8}, 11), "");
  EXPECT_THAT(task->output_problem({2, 11}, {2, 8}, 11), HasSubstr("expected [2, 8, 11]"));
  EXPECT_THAT(task->output_problem({2, 8, 50257}, {2, 8}, 11), HasSubstr("vocabulary (11)"));
  EXPECT_THAT(task->output_problem({2, 10}, {2, 1, 28, 28}, 10), HasSubstr("token ids"));
}

}  // namespace
}  // namespace mixt
