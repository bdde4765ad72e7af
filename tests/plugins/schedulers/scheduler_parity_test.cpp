// The step, cosine and warmup scheduler plugins against torch.optim.lr_scheduler
// (goldens: tests/golden/make_scheduler_golden.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(SchedulerParity, LearningRateCurvesMatchTorch) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/schedulers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_EQ(golden["cases"].size(), 4u);
  for (const auto& c : golden["cases"]) {
    nlohmann::json scheduler = c["options"];
    scheduler["name"] = c["name"];
    const nlohmann::json optimizer = {{"name", "sgd"}, {"lr", c["lr"]}};
    const RecipeNodePtr root =
        parse_yaml("optimizer: " + optimizer.dump() + "\nscheduler: " + scheduler.dump(), "golden");
    const Config recipe(root, "");
    at::Tensor param = at::zeros({1}).requires_grad_(true);
    auto opt = plugins.registry.make_optimizer(recipe.section("optimizer"), OptimizerContext{{{"p", param}}});
    auto sched = plugins.registry.make_scheduler(
        recipe.section("scheduler"), SchedulerContext{opt.get(), c["steps_per_epoch"].get<std::int64_t>(),
                                                      c["epochs"].get<std::int64_t>()});
    const auto rates = c["rates"].get<std::vector<double>>();
    for (std::size_t step = 0; step < rates.size(); ++step) {
      if (step > 0) sched->step();
      EXPECT_NEAR(opt->learning_rate(), rates[step], 1e-9 + 1e-7 * rates[step])
          << scheduler.dump() << " at step " << step;
    }
  }
}

TEST(SchedulerParity, ResumedScheduleContinuesWhereItStopped) {
  testing::BuiltPlugins plugins;
  const RecipeNodePtr root = parse_yaml(
      "optimizer: {name: sgd, lr: 0.5}\nscheduler: {name: cosine, warmup_steps: 3}", "test");
  const Config recipe(root, "");
  at::Tensor param = at::zeros({1}).requires_grad_(true);
  auto opt = plugins.registry.make_optimizer(recipe.section("optimizer"), OptimizerContext{{{"p", param}}});
  auto first = plugins.registry.make_scheduler(recipe.section("scheduler"), SchedulerContext{opt.get(), 10, 2});
  for (int i = 0; i < 7; ++i) first->step();
  const double expected = opt->learning_rate();
  torch::serialize::OutputArchive out;
  first->save(out);
  std::stringstream bytes;
  out.save_to(bytes);

  auto opt2 = plugins.registry.make_optimizer(recipe.section("optimizer"), OptimizerContext{{{"p", param}}});
  auto second = plugins.registry.make_scheduler(recipe.section("scheduler"), SchedulerContext{opt2.get(), 10, 2});
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  second->load(in);
  EXPECT_DOUBLE_EQ(opt2->learning_rate(), expected);
}

// The warm-up checks (longer than the run, negative) name the key the recipe gave, so the
// error points at the right line.
TEST(SchedulerOptions, WarmUpErrorsNameTheKeyGiven) {
  testing::BuiltPlugins plugins;
  at::Tensor param = at::zeros({1}).requires_grad_(true);
  for (const std::string key : {"warmup_steps: 21", "warmup_epochs: 2.5", "warmup_epochs: -1"}) {
    const RecipeNodePtr root =
        parse_yaml("optimizer: {name: sgd, lr: 0.5}\nscheduler: {name: cosine, " + key + "}", "test.yaml");
    const Config recipe(root, "");
    auto opt = plugins.registry.make_optimizer(recipe.section("optimizer"), OptimizerContext{{{"p", param}}});
    try {
      plugins.registry.make_scheduler(recipe.section("scheduler"), SchedulerContext{opt.get(), 10, 2});
      ADD_FAILURE() << key << " was accepted (20 steps in all)";
    } catch (const Error& e) {
      EXPECT_EQ(e.key_path(), "scheduler." + key.substr(0, key.find(':'))) << e.message();
      EXPECT_EQ(e.where().line, 2) << key;
    }
  }
}

}  // namespace
}  // namespace mixt
