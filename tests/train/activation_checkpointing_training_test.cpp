// trainer.activation_checkpointing on the zoo's models and gpt2: training with every block
// recomputed in the backward pass must be bit for bit the training without it — weights,
// batch-norm buffers, optimizer state and the loss of every step — under the precision
// policies, with gradient accumulation, and across a resume. The reference is the same
// recipe with `activation_checkpointing: none`, in the same process (same thread count).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <torch/serialize/output-archive.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "assembly/components.h"
#include "checkpoint/checkpointer.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"
#include "train/progress.h"
#include "common/run_directory.h"
#include "train/trainer.h"

namespace mixt {
namespace {

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

struct Trained {
  std::vector<at::Tensor> parameters, buffers;
  std::string optimizer_state;  // the optimizer's checkpoint archive, byte for byte
  std::vector<double> losses;
  std::int64_t steps = 0, skipped = 0;
  std::vector<std::string> checkpointed;
};

class LossRecorder : public Callback {
 public:
  explicit LossRecorder(std::vector<double>& losses) : losses_(losses) {}
  void on_step_end(const StepEnd& step) override { losses_.push_back(step.loss.item<double>()); }

 private:
  std::vector<double>& losses_;
};

struct Case {
  std::string model, precision = "{name: fp32}", checkpointing = "none";
  std::int64_t accumulate = 1, samples = 40, epochs = 1;  // 10 micro-batches of 4 an epoch
  // The training data and the task; by default `samples` synthetic images to classify.
  std::string data{}, task{};
};

// `options` and `facts`: the recipe's trainer options, and what building found.
Components build(const Case& c, TrainerOptions& options, RunFacts& facts) {
  // One thread, as the suite's other training tests: ctest runs two test processes at once,
  // and two-thread ATen pools on two cores starve each other (minutes instead of seconds).
  at::set_num_threads(1);
  at::manual_seed(0);
  const std::string data = c.data.empty() ? "{name: synthetic, shape: [3, 32, 32], num_classes: 10, size: " +
                                                 std::to_string(c.samples) + ", batch_size: 4}"
                                           : c.data;
  const RecipeNodePtr root = parse_yaml(
      "model: " + c.model + "\nprecision: " + c.precision + (c.task.empty() ? "" : "\ntask: " + c.task) +
          "\noptimizer: {name: sgd, lr: 0.01, momentum: 0.9}\n"
          "data: {train: " + data + "}\ntrainer: {device: cpu, log_every: 1000, epochs: " +
          std::to_string(c.epochs) + ", accumulate: " + std::to_string(c.accumulate) +
          ", activation_checkpointing: " + c.checkpointing + "}\n",
      "r.yaml");
  const Config recipe(root, "");
  options = TrainerOptions::read(recipe.section("trainer"));
  return build_components(recipe, plugins().registry, options, recipe.section("trainer"), facts);
}

Trained collect(Components& c, std::vector<double> losses, const TrainResult& result) {
  Trained t;
  for (const auto& p : c.model->parameters()) t.parameters.push_back(p.detach().clone());
  for (const auto& b : c.model->buffers()) t.buffers.push_back(b.detach().clone());
  torch::serialize::OutputArchive archive;
  c.optimizer->save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  t.optimizer_state = bytes.str();
  t.losses = std::move(losses);
  t.steps = result.optimizer_steps;
  t.skipped = result.skipped_steps;
  t.checkpointed = checkpointed_submodules(*c.model);
  return t;
}

Trained train(const Case& c) {
  TrainerOptions options;
  RunFacts facts;
  Components components = build(c, options, facts);
  Progress progress{false, 1000};
  std::vector<double> losses;
  Trainer trainer(components, facts, options, nullptr, progress);
  trainer.add_callback(std::make_shared<LossRecorder>(losses), "losses");
  const TrainResult result = trainer.fit();
  return collect(components, std::move(losses), result);
}

void expect_same_training(const Trained& plain, const Trained& recomputed, const std::string& what) {
  EXPECT_EQ(plain.losses, recomputed.losses) << what << ": the loss of every step";
  EXPECT_EQ(plain.steps, recomputed.steps) << what;
  EXPECT_EQ(plain.skipped, recomputed.skipped) << what;
  ASSERT_EQ(plain.parameters.size(), recomputed.parameters.size()) << what;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < plain.parameters.size(); ++i) differing += !at::equal(plain.parameters[i], recomputed.parameters[i]);
  EXPECT_EQ(differing, 0U) << what << ": parameters that differ";
  ASSERT_EQ(plain.buffers.size(), recomputed.buffers.size()) << what;
  differing = 0;
  for (std::size_t i = 0; i < plain.buffers.size(); ++i) differing += !at::equal(plain.buffers[i], recomputed.buffers[i]);
  EXPECT_EQ(differing, 0U) << what << ": buffers (batch-norm statistics) that differ";
  EXPECT_TRUE(plain.optimizer_state == recomputed.optimizer_state) << what << ": optimizer state";
  EXPECT_TRUE(plain.checkpointed.empty()) << what;
  EXPECT_FALSE(recomputed.checkpointed.empty()) << what << ": nothing was recomputed";
}

void expect_all_is_exact(Case c, const std::string& what) {
  c.checkpointing = "none";
  const Trained plain = train(c);
  c.checkpointing = "all";
  const Trained recomputed = train(c);
  expect_same_training(plain, recomputed, what);
  ASSERT_GT(plain.losses.size(), 1U) << what;
  EXPECT_NE(plain.losses.front(), plain.losses.back()) << what << ": it trained";
}

const char* kResNet50 = "{name: resnet50}";

TEST(ActivationCheckpointingTraining, ResNet50Fp32) {
  const Trained recomputed = train({kResNet50, "{name: fp32}", "all", 1, 8});
  // The stem, then the blocks of torchvision's names, every bottleneck of layer1 ... layer4.
  ASSERT_EQ(recomputed.checkpointed.size(), 17U);
  EXPECT_EQ(recomputed.checkpointed[0], "stem");
  EXPECT_EQ(recomputed.checkpointed[1], "layer1.0");
  EXPECT_EQ(recomputed.checkpointed.back(), "layer4.2");
  expect_all_is_exact({kResNet50}, "resnet50 fp32");
}

TEST(ActivationCheckpointingTraining, ResNet50AmpBf16) { expect_all_is_exact({kResNet50, "{name: amp_bf16}"}, "amp_bf16"); }

// A first scale that overflows float16 (skipped steps), backed off far enough to train. 4
// steps, not 10: float16 convolutions run tens of times slower than float32 on a CPU.
TEST(ActivationCheckpointingTraining, ResNet50AmpFp16WithASkippedStep) {
  Case c{kResNet50, "{name: amp_fp16, init_scale: 1.0e+9, backoff_factor: 1.0e-4}", "none", 1, 16};
  const Trained plain = train(c);
  EXPECT_GE(plain.skipped, 1);
  EXPECT_LT(plain.skipped, plain.steps);
  c.checkpointing = "all";
  expect_same_training(plain, train(c), "amp_fp16");
}

TEST(ActivationCheckpointingTraining, ResNet50Bf16Master) {
  expect_all_is_exact({kResNet50, "{name: bf16_master}"}, "bf16_master");
}

TEST(ActivationCheckpointingTraining, ResNet50AccumulatingTwoMicroBatches) {
  expect_all_is_exact({kResNet50, "{name: fp32}", "none", 2}, "accumulate 2");
}

TEST(ActivationCheckpointingTraining, VitB16WithDropout) {
  expect_all_is_exact({"{name: vit_b_16, image_size: 32, dropout: 0.1, attention_dropout: 0.1}"}, "vit_b_16");
}

TEST(ActivationCheckpointingTraining, ConvNextTinyWithStochasticDepth) {
  expect_all_is_exact({"{name: convnext_tiny, stochastic_depth_prob: 0.2}"}, "convnext_tiny");
}

// GPT-2 under causal_lm, each transformer.h.N recomputed, with dropout on the embeddings,
// the residual branches and the attention weights: the recompute draws the same masks. On
// the bytes of the text dataset's default file (GPL-3), shuffled: 32 windows of 16, 8 steps.
TEST(ActivationCheckpointingTraining, Gpt2WithDropoutOnText) {
  Case c{"{name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 32, context_length: 16, dropout: 0.1, "
         "attention_dropout: 0.1}"};
  c.data = "{name: text, context: 16, to: 0.015, batch_size: 4, workers: 0}";
  c.task = "{name: causal_lm}";
  c.checkpointing = "all";
  EXPECT_EQ(train(c).checkpointed, (std::vector<std::string>{"transformer.h.0", "transformer.h.1"}));
  expect_all_is_exact(c, "gpt2");
}

// Named submodules rather than `all`: a stage and a single block.
TEST(ActivationCheckpointingTraining, NamedSubmodulesAreExactToo) {
  Case c{kResNet50, "{name: fp32}", "none", 1, 16};
  const Trained plain = train(c);
  c.checkpointing = "[layer2, layer4.1]";
  const Trained named = train(c);
  expect_same_training(plain, named, "named");
  EXPECT_EQ(named.checkpointed, (std::vector<std::string>{"layer2", "layer4.1"}));
}

// Stopped after the first epoch and resumed from its checkpoint, a checkpointed run ends
// where the uninterrupted one does.
TEST(ActivationCheckpointingTraining, AResumeInTheMiddleEqualsTheUninterruptedRun) {
  Case c{kResNet50, "{name: fp32}", "all", 1, 24, 2};
  const Trained whole = train(c);

  testing::TempDir dir;
  RunDirectory run(dir.path(), "resume");
  Progress progress{false, 1000};
  TrainerOptions options;
  c.epochs = 1;
  RunFacts first_facts, second_facts;
  Components first = build(c, options, first_facts);
  Trainer(first, first_facts, options, &run, progress).fit();
  c.epochs = 2;
  Components second = build(c, options, second_facts);
  Trainer resumed(second, second_facts, options, nullptr, progress);
  resumed.resume(run.checkpoints() / "epoch-0001");
  const TrainResult result = resumed.fit();
  Trained after_resume = collect(second, {}, result);
  after_resume.losses.clear();
  Trained reference = whole;
  reference.losses.clear();
  reference.steps = after_resume.steps;  // this process took only the second epoch's steps
  ASSERT_EQ(reference.parameters.size(), after_resume.parameters.size());
  for (std::size_t i = 0; i < reference.parameters.size(); ++i) {
    EXPECT_TRUE(at::equal(reference.parameters[i], after_resume.parameters[i])) << "parameter " << i;
  }
  for (std::size_t i = 0; i < reference.buffers.size(); ++i) {
    EXPECT_TRUE(at::equal(reference.buffers[i], after_resume.buffers[i])) << "buffer " << i;
  }
  EXPECT_TRUE(reference.optimizer_state == after_resume.optimizer_state) << "optimizer state";
}

// The recipe error that building ResNet-50 with `setting` raises; a test failure if none.
std::optional<Error> recipe_error_of(const std::string& setting) {
  TrainerOptions options;
  RunFacts facts;
  try {
    build({kResNet50, "{name: fp32}", setting, 1, 8}, options, facts);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::recipe) << setting;
    return e;
  }
  ADD_FAILURE() << "activation_checkpointing: " << setting << " was accepted";
  return std::nullopt;
}

// Recipe errors: an unknown name at its file:line:column with the closest match, a name
// the model never routes, and a value that is neither none, all nor a list.
TEST(ActivationCheckpointingRecipe, UnknownNamesAndValuesAreRecipeErrors) {
  using ::testing::HasSubstr;
  if (const auto e = recipe_error_of("[layer1, layr2]")) {
    EXPECT_THAT(std::string(e->what()), HasSubstr("r.yaml:5:"));
    EXPECT_THAT(e->message(), HasSubstr("no submodule named 'layr2'"));
    EXPECT_THAT(e->hint(), HasSubstr("layer2"));
  }
  // A submodule the model has but never routes (a convolution inside a block): found by the
  // blank forward pass when the components are built, before any training.
  if (const auto e = recipe_error_of("[layer1.0.conv1]")) {
    EXPECT_THAT(e->message(), HasSubstr("never ran 'layer1.0.conv1' through mixt::call_submodule"));
    EXPECT_THAT(e->message(), HasSubstr("recompute it in the backward pass"));
    EXPECT_EQ(e->key_path(), "trainer.activation_checkpointing");
  }
  if (const auto e = recipe_error_of("everything")) {
    EXPECT_THAT(e->message(), HasSubstr("expected none, all or a list of submodule names"));
  }
}

}  // namespace
}  // namespace mixt
