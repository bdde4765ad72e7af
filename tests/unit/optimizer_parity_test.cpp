// The sgd and adamw plugins against torch.optim (goldens: tests/golden/make_optimizer_golden.py),
// bit for bit: single-tensor updates against torch.optim's CPU default, fused: true against
// torch.optim's fused=True.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plugins.h"
#include "recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(OptimizerParity, MatchesTorchOptimStepByStep) {
  const auto golden = nlohmann::json::parse(testing::read_file(MIXT_SOURCE_DIR "/tests/golden/optimizers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_GE(golden["cases"].size(), 12u);
  for (const auto& c : golden["cases"]) {
    nlohmann::json section = c["options"];
    section["name"] = c["optimizer"];
    const RecipeNodePtr root = parse_yaml("optimizer: " + section.dump(), "golden");
    const Config config = Config(root, "").section("optimizer");

    at::Tensor param = at::tensor(c["initial"].get<std::vector<float>>()).requires_grad_(true);
    auto optimizer = plugins.registry.make_optimizer(config, OptimizerContext{{{"p", param}}});
    for (std::size_t step = 0; step < c["grads"].size(); ++step) {
      param.mutable_grad() = at::tensor(c["grads"][step].get<std::vector<float>>());
      optimizer->step();
      const at::Tensor expected = at::tensor(c["after"][step].get<std::vector<float>>());
      EXPECT_TRUE(at::equal(param.detach(), expected))
          << section.dump() << " step " << step << "\nmixt:  " << param << "\ntorch: " << expected;
    }
    EXPECT_DOUBLE_EQ(optimizer->learning_rate(), c["options"]["lr"].get<double>());
  }
}

TEST(OptimizerParity, NoWeightDecayOnOneDimensionalParameters) {
  const auto golden = nlohmann::json::parse(testing::read_file(MIXT_SOURCE_DIR "/tests/golden/optimizers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_EQ(golden["grouped_cases"].size(), 4u);
  for (const auto& c : golden["grouped_cases"]) {
    nlohmann::json section = c["options"];
    section["name"] = c["optimizer"];
    const RecipeNodePtr root = parse_yaml("optimizer: " + section.dump(), "golden");
    at::Tensor weight = at::tensor(c["initial"][0].get<std::vector<float>>()).view({2, 3}).requires_grad_(true);
    at::Tensor bias = at::tensor(c["initial"][1].get<std::vector<float>>()).requires_grad_(true);
    auto optimizer = plugins.registry.make_optimizer(Config(root, "").section("optimizer"),
                                                     OptimizerContext{{{"fc.weight", weight}, {"fc.bias", bias}}});
    for (std::size_t step = 0; step < c["grads"].size(); ++step) {
      weight.mutable_grad() = at::tensor(c["grads"][step][0].get<std::vector<float>>()).view({2, 3});
      bias.mutable_grad() = at::tensor(c["grads"][step][1].get<std::vector<float>>());
      optimizer->step();
      EXPECT_TRUE(at::equal(weight.detach().flatten(), at::tensor(c["after"][step][0].get<std::vector<float>>())))
          << section.dump() << " step " << step;
      EXPECT_TRUE(at::equal(bias.detach(), at::tensor(c["after"][step][1].get<std::vector<float>>())))
          << section.dump() << " step " << step;
    }
  }
}

}  // namespace
}  // namespace mixt
