// recipes/resnet50: the settings of NVIDIA's ResNet-50 v1.5 PyTorch recipe (published in
// DeepLearningExamples' README: SGD momentum 0.875, lr 0.256 for batch 256, weight decay
// 3.0517578125e-05 not on batch norm and biases, label smoothing 0.1, cosine schedule
// with warm-up, 90 epochs), one file per precision policy, and the synthetic-data
// variant running through `mixt bench`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::string kRecipes = testing::configured::source_dir() + "/recipes/resnet50/";

TEST(ResNet50Recipes, EveryPolicyFileInheritsNvidiasRecipe) {
  for (const std::string policy : {"fp32", "tf32", "amp_fp16", "amp_bf16", "bf16_master", "fp16_master", "bf16_true"}) {
    const Recipe recipe = load_recipe(kRecipes + policy + ".yaml");
    const Config root = recipe.config();
    const Config precision = root.section("precision");
    EXPECT_EQ(precision.string("name"), policy);
    EXPECT_EQ(precision.keys().size(), 1u) << policy << ": the policy runs with its own defaults";
    const Config optimizer = root.section("optimizer");
    EXPECT_EQ(optimizer.string("name"), "sgd");
    EXPECT_DOUBLE_EQ(optimizer.number("lr"), 0.256);
    EXPECT_DOUBLE_EQ(optimizer.number("momentum"), 0.875);
    EXPECT_DOUBLE_EQ(optimizer.number("weight_decay"), 3.0517578125e-05);
    EXPECT_FALSE(optimizer.boolean("weight_decay_1d", true));
    EXPECT_EQ(root.section("scheduler").string("name"), "cosine");
    const Config trainer = root.section("trainer");
    EXPECT_DOUBLE_EQ(root.section("task").number("label_smoothing"), 0.1);
    EXPECT_EQ(trainer.integer("epochs"), 90);
    EXPECT_TRUE(trainer.boolean("channels_last", false));
    EXPECT_EQ(root.section("data").section("train").integer("batch_size"), 256);
    EXPECT_EQ(root.section("model").string("name"), "resnet50");
  }
}

TEST(ResNet50Recipes, ImageNetRootThatIsNotThereIsAClearRecipeError) {
  testing::TempDir dir;
  const auto result = testing::run_mixt({"check", kRecipes + "amp_fp16.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("base.yaml:12:"));
  EXPECT_THAT(result.output, HasSubstr("data.train.root: dataset root does not exist: /data/imagenet/train"))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("on the command line (data.train.root=/path/to/folder)"))
      << result.output;
}

TEST(ResNet50Recipes, SyntheticRecipeBenchesEveryPolicyOnTheCpu) {
  testing::TempDir dir;
  // 64x64 inputs and batch 2 keep ResNet-50 cheap on two cores; the recipe is otherwise as shipped.
  const auto result = testing::run_mixt({"bench", kRecipes + "synthetic.yaml", "--precision", "fp32,amp_bf16",
                                         "--steps", "2", "--warmup", "1", "--batch", "2", "trainer.threads=1",
                                         "data.train.shape=[3,64,64]", "data.train.size=16", "output=out"},
                                        dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::vector<fs::path> runs;
  for (const auto& item : fs::directory_iterator(dir.path() / "out" / "resnet50-synthetic-bench")) {
    runs.push_back(item.path());
  }
  ASSERT_EQ(runs.size(), 1u);
  const auto report = nlohmann::json::parse(testing::read_file(runs[0] / "bench.json"));
  ASSERT_EQ(report["results"].size(), 2u);
  for (const auto& row : report["results"]) {
    EXPECT_FALSE(row.contains("error")) << row.dump();
    EXPECT_EQ(row["batch"], 2) << row.dump();
    EXPECT_EQ(row["steps"], 2) << row.dump();
    EXPECT_TRUE(row["loss_finite"].get<bool>()) << row.dump();
    EXPECT_EQ(row["skipped_steps"], 0) << row.dump();
  }
}

}  // namespace
}  // namespace mixt
