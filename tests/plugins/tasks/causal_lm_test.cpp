// The causal_lm task against PyTorch: nanoGPT's training loss (F.cross_entropy over the
// flattened positions, with and without label smoothing) and an evaluation's loss per token
// and perplexity over two batches (goldens: tests/golden/make_causal_lm_golden.py). And
// what it refuses: a model whose output is not [batch, time, vocab], data that is not tokens.
// Its fused loss (the head inside the loss, mixt/linear_head.h) on gpt2's and llama's heads
// against its plain loss over their logits: the loss and every parameter's gradient.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "assembly/components.h"
#include "mixt/linear_head.h"
#include "mixt/packed_sequences.h"
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

// Packed rows' targets [batch, 2, time] (mixt/packed_sequences.h): the loss and an
// evaluation read the next tokens, the positions go to the model.
TEST(CausalLm, PackedTargetsGiveTheLossOfTheirNextTokensAndThePositionsToTheModel) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  const auto* packed = dynamic_cast<const PackedTargets*>(task.get());
  ASSERT_NE(packed, nullptr);
  for (const auto& batch : golden()["batches"]) {
    const at::Tensor logits = nested_json_tensor(batch["logits"], at::kFloat);
    const at::Tensor targets = nested_json_tensor(batch["targets"], at::kLong);
    const at::Tensor positions = at::arange(targets.size(1)).expand_as(targets).remainder(3);
    const at::Tensor both = at::stack({targets, positions}, 1);
    EXPECT_EQ(task->loss(logits, both).item<float>(), task->loss(logits, targets).item<float>());
    EXPECT_TRUE(packed->positions(both).equal(positions));
    EXPECT_FALSE(packed->positions(targets).defined());
    const auto plain = task->start_evaluation(false), rows = task->start_evaluation(false);
    plain->add(logits, targets);
    rows->add(logits, both);
    EXPECT_EQ(plain->totals(), rows->totals());
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

// Targets of -100 (instruction data's prompt tokens) count for nothing: the training loss is
// the mean over the others, and an evaluation sums their loss and counts only them, as
// cross_entropy(ignore_index=-100) with reduction "sum" over "mean" does.
TEST(CausalLm, TargetsOfMinus100CountForNothingInTheLossAndTheEvaluation) {
  const testing::BuiltPlugins plugins;
  const auto task = causal_lm(plugins);
  at::manual_seed(0);
  const at::Tensor logits = at::randn({2, 5, 11});
  const at::Tensor targets = at::tensor({3, -100, 7, -100, 1, -100, -100, 10, 0, -100}, at::kLong).view({2, 5});
  const at::Tensor valid = targets.ne(-100);
  const at::Tensor kept_logits = logits.reshape({-1, 11}).index({valid.reshape({-1})});
  const at::Tensor kept_targets = targets.reshape({-1}).index({valid.reshape({-1})});
  const double expected = at::cross_entropy_loss(kept_logits, kept_targets).item<double>();
  EXPECT_NEAR(task->loss(logits, targets).item<double>(), expected, 1e-6);
  const auto score = task->start_evaluation(false);
  score->add(logits, targets);
  const std::vector<double> totals = score->totals();
  EXPECT_EQ(totals[1], 5.0) << "five targets counted";
  EXPECT_NEAR(score->loss(totals), expected, 1e-6);
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

// The loss and every gradient of the fused path within 1e-6 (relative to the largest) of
// the plain loss over the model's logits, float32, with padding (targets -100) and label
// smoothing; small chunks so that several run and the last is short.
TEST(CausalLm, FusedLossGivesThePlainLossAndGradientsOnGpt2AndLlamaHeads) {
  const testing::BuiltPlugins plugins;
  for (const std::string model_yaml :
       {"{name: gpt2, vocab_size: 301, context_length: 16, num_layers: 1, num_heads: 2, hidden_dim: 32, dropout: 0, "
        "attention_dropout: 0}",
        "{name: llama, vocab_size: 301, context_length: 16, num_layers: 1, num_heads: 4, num_kv_heads: 2, "
        "hidden_dim: 32, mlp_dim: 48, tie_embeddings: false}"}) {
    for (const std::string options : {", loss_chunk: 7", ", loss_chunk: 5, label_smoothing: 0.1"}) {
      SCOPED_TRACE(model_yaml + options);
      at::manual_seed(1);
      const auto model = build_model(Config(parse_yaml(model_yaml, "m"), "model"), plugins.registry, {});
      const auto task = causal_lm(plugins, options);
      const auto* fused = dynamic_cast<const HeadLoss*>(task.get());
      auto* with_head = dynamic_cast<LinearHead*>(model.get());
      ASSERT_NE(fused, nullptr);
      ASSERT_NE(with_head, nullptr);
      EXPECT_TRUE(fused->fuses_head());
      const at::Tensor ids = at::randint(0, 301, {3, 16}, at::kLong);
      at::Tensor targets = at::randint(0, 301, {3, 16}, at::kLong);
      targets.slice(1, 12).fill_(-100);

      const auto gradients = [&](bool use_fused) {
        model->zero_grad();
        const at::Tensor loss = use_fused ? fused->head_loss(with_head->features(ids), with_head->head(), targets)
                                          : task->loss(model->forward(ids), targets);
        loss.backward();
        std::vector<at::Tensor> out = {loss.detach()};
        for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
        return out;
      };
      const std::vector<at::Tensor> plain = gradients(false), chunked = gradients(true);
      ASSERT_EQ(plain.size(), chunked.size());
      for (std::size_t i = 0; i < plain.size(); ++i) {
        const double scale = std::max(plain[i].abs().max().item<double>(), 1e-12);
        EXPECT_LE((chunked[i] - plain[i]).abs().max().item<double>() / scale, 1e-6) << "tensor " << i;
      }
    }
  }
  EXPECT_FALSE(dynamic_cast<const HeadLoss*>(causal_lm(plugins, ", fused_loss: false").get())->fuses_head());
}

}  // namespace
}  // namespace mixt
