// The sgd and adamw plugins against torch.optim (goldens: tests/golden/make_optimizer_golden.py),
// bit for bit: single-tensor updates against torch.optim's CPU default, foreach: true against
// its foreach=True (its CUDA default), fused: true against its fused=True.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include <torch/optim/sgd.h>

#include "mixt/helpers/torch_optimizer.h"
#include "operator_calls.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(OptimizerParity, MatchesTorchOptimStepByStep) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/optimizers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_GE(golden["cases"].size(), 18u);
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
      // The gradient as the step left it (foreach Nesterov adds the momentum into it).
      const at::Tensor expected_grad = at::tensor(c["grads_after"][step].get<std::vector<float>>());
      EXPECT_TRUE(at::equal(param.grad(), expected_grad))
          << section.dump() << " step " << step << "\nmixt grad:  " << param.grad()
          << "\ntorch grad: " << expected_grad;
    }
    EXPECT_DOUBLE_EQ(optimizer->learning_rate(), c["options"]["lr"].get<double>());
  }
}

TEST(OptimizerParity, NoWeightDecayOnOneDimensionalParameters) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/optimizers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_EQ(golden["grouped_cases"].size(), 6u);
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

// A parameter whose first gradient comes after the others' starts its state then, as
// torch.optim's single-tensor path does: bit for bit with fused: false and with foreach:
// true; with fused: true the same within float rounding (the kernels order the
// arithmetic differently). A fused SGD that started the late momentum buffer at zero would
// move that parameter 10 % short (dampening 0.1).
TEST(OptimizerParity, ParameterWithALateFirstGradient) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/optimizers.json"));
  testing::BuiltPlugins plugins;
  ASSERT_EQ(golden["late_cases"].size(), 2u);
  for (const auto& c : golden["late_cases"]) {
    for (const std::string implementation : {"single_tensor", "foreach", "fused"}) {
      const bool fused = implementation == "fused";
      nlohmann::json section = c["options"];
      section["name"] = c["optimizer"];
      section["fused"] = fused;
      section["foreach"] = implementation == "foreach" ? "true" : "false";
      const RecipeNodePtr root = parse_yaml("optimizer: " + section.dump(), "golden");
      at::Tensor early = at::tensor(c["initial"][0].get<std::vector<float>>()).requires_grad_(true);
      at::Tensor late = at::tensor(c["initial"][1].get<std::vector<float>>()).requires_grad_(true);
      auto optimizer = plugins.registry.make_optimizer(Config(root, "").section("optimizer"),
                                                       OptimizerContext{{{"early", early}, {"late", late}}});
      const std::size_t late_steps = c["late_steps"].get<std::size_t>();
      for (std::size_t step = 0; step < c["grads"].size(); ++step) {
        early.mutable_grad() = at::tensor(c["grads"][step][0].get<std::vector<float>>());
        const bool late_has_grad = step >= late_steps;
        late.mutable_grad() = late_has_grad ? at::tensor(c["grads"][step][1].get<std::vector<float>>()) : at::Tensor();
        optimizer->step();
        for (std::size_t which : {0u, 1u}) {
          const at::Tensor actual = (which == 0 ? early : late).detach();
          const at::Tensor expected = at::tensor(c["after"][step][which].get<std::vector<float>>());
          const bool same =
              fused ? at::allclose(actual, expected, /*rtol=*/1e-6, /*atol=*/1e-7) : at::equal(actual, expected);
          EXPECT_TRUE(same) << section.dump() << " step " << step << (which == 0 ? " early" : " late") << "\nmixt:  "
                            << actual << "\ntorch: " << expected;
        }
      }
    }
  }
}

// The SDK's weight_decay_groups() for torch::optim optimizers, on the same golden: LibTorch's
// SGD with the 1-D bias in a group without weight decay equals torch.optim's.
TEST(OptimizerParity, SdkWeightDecayGroupsForTorchOptim) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/optimizers.json"));
  const auto& c = golden["grouped_cases"][0];
  ASSERT_EQ(c["optimizer"], "sgd");
  ASSERT_FALSE(c["options"].contains("fused"));
  at::Tensor weight = at::tensor(c["initial"][0].get<std::vector<float>>()).view({2, 3}).requires_grad_(true);
  at::Tensor bias = at::tensor(c["initial"][1].get<std::vector<float>>()).requires_grad_(true);
  const OptimizerContext context{{{"fc.weight", weight}, {"fc.bias", bias}}};
  const auto options = torch::optim::SGDOptions(c["options"]["lr"].get<double>())
                           .momentum(c["options"]["momentum"].get<double>())
                           .weight_decay(c["options"]["weight_decay"].get<double>());
  TorchOptimizer optimizer(std::make_unique<torch::optim::SGD>(weight_decay_groups(context, options, false), options));
  for (std::size_t step = 0; step < c["grads"].size(); ++step) {
    weight.mutable_grad() = at::tensor(c["grads"][step][0].get<std::vector<float>>()).view({2, 3});
    bias.mutable_grad() = at::tensor(c["grads"][step][1].get<std::vector<float>>());
    optimizer.step();
    EXPECT_TRUE(at::equal(weight.detach().flatten(), at::tensor(c["after"][step][0].get<std::vector<float>>())));
    EXPECT_TRUE(at::equal(bias.detach(), at::tensor(c["after"][step][1].get<std::vector<float>>()))) << step;
  }
}

// The aten operators one step() calls.
std::set<std::string> operators_of_step(Optimizer& optimizer) {
  const std::vector<std::string> calls = testing::operators_called_during([&] { optimizer.step(); });
  return {calls.begin(), calls.end()};
}

bool any_contains(const std::set<std::string>& names, const std::string& part) {
  for (const auto& name : names) {
    if (name.find(part) != std::string::npos) return true;
  }
  return false;
}

// On the CPU foreach and single-tensor updates give the same numbers, so which kernels ran
// is asked of the dispatcher: foreach: true runs the _foreach_ ops, fused: true the fused
// kernel, and auto on CPU tensors the single-tensor ops, as torch.optim chooses.
TEST(OptimizerImplementation, EachRunsTheKernelsTorchOptimRuns) {
  testing::BuiltPlugins plugins;
  struct Case {
    std::string options;
    std::vector<std::string> expected;  // operator names that must appear
    bool foreach_allowed;
  };
  const std::vector<Case> cases = {
      {"{name: sgd, lr: 0.1, momentum: 0.9}", {"aten::mul_"}, false},
      {"{name: sgd, lr: 0.1, momentum: 0.9, foreach: true}", {"aten::_foreach_mul_", "aten::_foreach_add_"}, true},
      {"{name: sgd, lr: 0.1, momentum: 0.9, fused: true}", {"aten::_fused_sgd_"}, false},
      {"{name: adamw, lr: 0.01}", {"aten::lerp_", "aten::addcdiv_"}, false},
      {"{name: adamw, lr: 0.01, foreach: true}", {"aten::_foreach_lerp_", "aten::_foreach_addcdiv_"}, true},
      {"{name: adamw, lr: 0.01, fused: true}", {"aten::_fused_adamw_"}, true},  // + _foreach_add_ on the steps
  };
  for (const auto& c : cases) {
    at::Tensor a = at::randn({4, 3}).requires_grad_(true), b = at::randn({3}).requires_grad_(true);
    const RecipeNodePtr root = parse_yaml("optimizer: " + c.options, "test");
    auto optimizer = plugins.registry.make_optimizer(Config(root, "").section("optimizer"),
                                                     OptimizerContext{{{"a", a}, {"b", b}}});
    for (int step = 0; step < 2; ++step) {  // the second step: momentum buffers exist
      a.mutable_grad() = at::randn({4, 3});
      b.mutable_grad() = at::randn({3});
      const std::set<std::string> names = operators_of_step(*optimizer);
      if (step == 0) continue;
      for (const auto& name : c.expected) {
        EXPECT_TRUE(names.count(name)) << c.options << " did not call " << name;
      }
      if (!c.foreach_allowed) {
        EXPECT_FALSE(any_contains(names, "_foreach_")) << c.options;
      }
    }
  }
}

// foreach takes auto, true or false, and not together with fused (torch.optim's rule).
TEST(OptimizerOptions, ForeachValuesAndTheFusedConflictAreRecipeErrors) {
  testing::BuiltPlugins plugins;
  at::Tensor param = at::zeros({3}).requires_grad_(true);
  const auto error_of = [&](const std::string& options) -> std::string {
    try {
      const RecipeNodePtr root = parse_yaml("optimizer: " + options, "test");
      plugins.registry.make_optimizer(Config(root, "").section("optimizer"), OptimizerContext{{{"p", param}}});
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of("{name: sgd, lr: 0.1, foreach: sometimes}"), HasSubstr("expected auto, true or false"));
  EXPECT_THAT(error_of("{name: sgd, lr: 0.1, foreach: true, fused: true}"), HasSubstr("cannot both be true"));
  for (const std::string ok : {"auto", "true", "false"}) {
    EXPECT_EQ(error_of("{name: sgd, lr: 0.1, foreach: " + ok + "}"), "") << ok;
  }
}

// Checkpointing mid-run: 3 steps, save, a fresh optimizer loads the state and takes 3 more;
// the parameters must be bitwise those of 6 uninterrupted steps (momentum buffers, Adam
// moments and step counts all survive, for both implementations).
TEST(OptimizerParity, StateSurvivesSaveAndLoad) {
  testing::BuiltPlugins plugins;
  for (const std::string options : {"{name: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.01}",
                                    "{name: sgd, lr: 0.05, momentum: 0.9, fused: true}",
                                    "{name: sgd, lr: 0.05, momentum: 0.9, foreach: true}",
                                    "{name: adamw, lr: 0.01, amsgrad: true, foreach: true}",
                                    "{name: adamw, lr: 0.01, amsgrad: true}", "{name: adamw, lr: 0.01, fused: true}"}) {
    const RecipeNodePtr root = parse_yaml("optimizer: " + options, "test");
    const Config config = Config(root, "").section("optimizer");
    at::manual_seed(5);
    const at::Tensor initial = at::randn({4, 3});
    std::vector<at::Tensor> grads;
    for (int i = 0; i < 6; ++i) grads.push_back(at::randn({4, 3}));
    const auto run = [&](int from, int to, Optimizer& optimizer, at::Tensor& param) {
      for (int i = from; i < to; ++i) {
        param.mutable_grad() = grads[static_cast<std::size_t>(i)].clone();
        optimizer.step();
      }
    };
    at::Tensor straight = initial.clone().requires_grad_(true);
    auto uninterrupted = plugins.registry.make_optimizer(config, OptimizerContext{{{"w", straight}}});
    run(0, 6, *uninterrupted, straight);

    at::Tensor resumed = initial.clone().requires_grad_(true);
    auto first = plugins.registry.make_optimizer(config, OptimizerContext{{{"w", resumed}}});
    run(0, 3, *first, resumed);
    torch::serialize::OutputArchive out;
    first->save(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    std::istringstream in_bytes(bytes.str());
    torch::serialize::InputArchive in;
    in.load_from(in_bytes);
    auto second = plugins.registry.make_optimizer(config, OptimizerContext{{{"w", resumed}}});
    second->load(in);
    run(3, 6, *second, resumed);
    EXPECT_TRUE(at::equal(resumed.detach(), straight.detach())) << options;
  }
}

}  // namespace
}  // namespace mixt
