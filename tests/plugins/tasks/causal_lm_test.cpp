// The causal_lm task against PyTorch: nanoGPT's training loss (F.cross_entropy over the
// flattened positions, with and without label smoothing) and an evaluation's loss per token
// and perplexity over two batches (goldens: tests/golden/make_causal_lm_golden.py). And
// what it refuses: a model whose output is not [batch, time, vocab], data that is not tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "nested_json_tensor.h"
#include "plugins.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

using testing::nested_json_tensor;

std::unique_ptr<Task> causal_lm(const testing::BuiltPlugins& plugins, const std::string& options = "") {
  return plugins.registry.make_task(Config(parse_yaml("{name: causal_lm" + options + "}", "t"), "task"),
                                    TaskContext{at::kCPU, 11});
}

const nlohmann::json& golden() {
  static const nlohmann::json g =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/causal_lm.json"));
  return g;
}

TEST(CausalLm, TrainingLossIsNanoGptsCrossEntropyOverEveryPosition) {
  const testing::BuiltPlugins plugins;
  const auto plain = causal_lm(plugins), smoothed = causal_lm(plugins, ", label_smoothing: 0.1");
  for (const auto& batch : golden()["batches"]) {
    const at::Tensor logits = nested_json_tensor(batch["logits"], at::kFloat);
    const at::Tensor targets = nested_json_tensor(batch["targets"], at::kLong);
    EXPECT_FLOAT_EQ(plain->loss(logits, targets).item<float>(), batch["loss"].get<float>());
    EXPECT_FLOAT_EQ(smoothed->loss(logits, targets).item<float>(), batch["loss_smoothed_0.1"].get<float>());
  }
}

TEST(CausalLm, AnEvaluationReportsTheLossPerTokenAndItsPerplexity) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  const auto score = task->start_evaluation(/*confusion=*/true);
  for (const auto& batch : golden()["batches"]) {
    score->add(nested_json_tensor(batch["logits"], at::kFloat), nested_json_tensor(batch["targets"], at::kLong));
  }
  const std::vector<double> totals = score->totals();
  EXPECT_NEAR(score->loss(totals), golden()["evaluation_loss"].get<double>(), 1e-6);
  const std::vector<Figure> figures = score->finish(totals);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].name, "perplexity");
  EXPECT_FALSE(figures[0].higher_is_better);
  EXPECT_NEAR(figures[0].value, golden()["evaluation_perplexity"].get<double>(), 1e-5);
  EXPECT_FALSE(score->confusion().defined());  // none over a vocabulary
}

// What the framework asks the task instead of its name: rates in tokens, the sequence open
// on export, sampling allowed.
TEST(CausalLm, CountsTokensLeavesTheSequenceOpenAndPredictsTheNextToken) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  const std::optional<Throughput> rate = task->throughput({64});
  ASSERT_TRUE(rate.has_value());
  EXPECT_EQ(rate->unit, "tokens");
  EXPECT_EQ(rate->per_sample, 64);
  const ExportedInterface exported = task->exported();
  ASSERT_EQ(exported.open_axes.size(), 1u);
  EXPECT_EQ(exported.open_axes[0].input_dim, 1);
  EXPECT_EQ(exported.open_axes[0].name, "time");
  EXPECT_TRUE(task->predicts_next_token());
  EXPECT_EQ(task->describe_classes(50257), "vocabulary 50257");
  const testing::BuiltPlugins others;
  EXPECT_FALSE(others.classification()->predicts_next_token());
  EXPECT_FALSE(others.classification()->throughput({3, 32, 32}).has_value());
}

TEST(CausalLm, LabelSmoothingIsAnOptionOfTheTaskInZeroToOne) {
  const testing::BuiltPlugins plugins;
  try {
    causal_lm(plugins, ", label_smoothing: 1.5");
    ADD_FAILURE() << "label_smoothing 1.5 was taken";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("label_smoothing"));
    EXPECT_THAT(e.what(), HasSubstr("[0, 1)"));
  }
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
