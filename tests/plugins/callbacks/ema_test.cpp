// The ema callback against timm's ModelEmaV3 (goldens: tests/golden/make_ema_golden.py):
// the same states, steps and skipped step give the same average, bit for bit; evaluation
// swaps it in and the live weights back; a checkpoint's save/load continues it exactly.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <nlohmann/json.hpp>

#include "mixt/helpers/state_dict.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"
#include "train/stop_control.h"

namespace mixt {
namespace {

// timm's test module: fc = Linear(3, 4), bn = BatchNorm1d(4), in that order.
struct Net : Model {
  Net() {
    register_module("fc", torch::nn::Linear(3, 4));
    register_module("bn", torch::nn::BatchNorm1d(4));
  }
  at::Tensor forward(const at::Tensor& input) override { return input; }
};

at::Tensor tensor_like(const nlohmann::json& value, const at::Tensor& like) {
  if (value.is_number()) return at::tensor(value.get<std::int64_t>(), like.options()).view(like.sizes());
  std::vector<float> flat;
  const std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_array()) {
      for (const auto& item : v) walk(item);
    } else {
      flat.push_back(v.get<float>());
    }
  };
  walk(value);
  return at::tensor(flat).view(like.sizes());
}

void load_state(Model& model, const nlohmann::json& state) {
  at::NoGradGuard no_grad;
  for (auto& [name, tensor] : state_dict(model)) tensor.copy_(tensor_like(state.at(name), tensor));
}

// The model's state dict equals `expected` exactly (float32 values from JSON are exact).
void expect_state(Model& model, const nlohmann::json& expected, const std::string& what) {
  for (const auto& [name, tensor] : state_dict(model)) {
    EXPECT_TRUE(at::equal(tensor, tensor_like(expected.at(name), tensor))) << what << ": " << name;
  }
}

struct EmaRun {
  testing::BuiltPlugins& plugins;
  std::shared_ptr<Net> model = std::make_shared<Net>();
  std::unique_ptr<PrecisionPolicy> fp32;
  std::unique_ptr<Callback> ema;
  TrainState state;

  EmaRun(testing::BuiltPlugins& p, const nlohmann::json& options) : plugins(p) {
    nlohmann::json section = options;
    section["name"] = "ema";
    ema = plugins.registry.make_callback(Config(parse_yaml("c: " + section.dump(), "t"), "").section("c"),
                                         CallbackContext{at::kCPU, model, 0, 1});
    fp32 = plugins.registry.make_precision(Config(parse_yaml("c: {name: fp32}", "t"), "").section("c"),
                                           PrecisionContext{});
  }
  StopControl control;
  // Steps first..last (1-based) of the golden: each step's state, then on_step_end.
  void steps(const nlohmann::json& golden, std::int64_t first, std::int64_t last) {
    const auto skipped = golden["skipped"].get<std::vector<std::int64_t>>();
    for (std::int64_t step = first; step <= last; ++step) {
      load_state(*model, golden["states"][static_cast<std::size_t>(step)]);
      state.global_step = step;
      const bool applied = std::find(skipped.begin(), skipped.end(), step) == skipped.end();
      const StepEnd end{state, step, last, applied, at::zeros({}), 0.1, *fp32, 0, 0, false, control};
      ema->on_step_end(end);
    }
  }
};

TEST(EmaCallback, FollowsTimmsModelEmaV3BitForBit) {
  testing::BuiltPlugins plugins;
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/ema.json"));
  const auto steps = golden["steps"].get<std::int64_t>();
  ASSERT_EQ(golden["cases"].size(), 3u);
  for (const auto& c : golden["cases"]) {
    const std::string what = c["options"].dump();
    EmaRun run(plugins, c["options"]);
    load_state(*run.model, golden["states"][0]);
    run.ema->on_fit_start(FitStart{run.state, {}, 0, 1});
    run.steps(golden, 1, steps);
    EXPECT_EQ(run.ema->evaluated_weights(), "ema");
    run.ema->on_evaluation_start(run.state, "");  // the model's own evaluation: nothing swapped
    expect_state(*run.model, golden["states"][static_cast<std::size_t>(steps)], what + " own evaluation");
    run.ema->on_evaluation_start(run.state, "ema");
    expect_state(*run.model, c["average"], what);
    Evaluation evaluation;
    evaluation.weights = "ema";
    run.ema->on_evaluation_end(run.state, evaluation);
    expect_state(*run.model, golden["states"][static_cast<std::size_t>(steps)], what + " after the evaluation");
  }
}

TEST(EmaCallback, ACheckpointContinuesTheAverageExactly) {
  testing::BuiltPlugins plugins;
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/ema.json"));
  const auto steps = golden["steps"].get<std::int64_t>();
  const auto& c = golden["cases"][2];  // warm-up, a late start, every 2 steps
  EmaRun first(plugins, c["options"]);
  load_state(*first.model, golden["states"][0]);
  first.ema->on_fit_start(FitStart{first.state, {}, 0, 1});
  first.steps(golden, 1, 7);
  torch::serialize::OutputArchive saved;
  first.ema->save(saved);
  std::stringstream bytes;
  saved.save_to(bytes);

  EmaRun resumed(plugins, c["options"]);
  torch::serialize::InputArchive loaded;
  loaded.load_from(bytes);
  resumed.ema->load(loaded);
  load_state(*resumed.model, golden["states"][7]);  // the checkpoint's weights
  resumed.state.global_step = 7;
  resumed.ema->on_fit_start(FitStart{resumed.state, {}, 0, 1});
  resumed.steps(golden, 8, steps);
  resumed.ema->on_evaluation_start(resumed.state, "ema");
  expect_state(*resumed.model, c["average"], "resumed");
}

TEST(EmaCallback, BadOptionsAreRecipeErrors) {
  testing::BuiltPlugins plugins;
  const std::vector<nlohmann::json> bad = {{{"decay", 1.5}}, {{"every", 0}}, {{"device", "gpu"}},
                                            {{"warmup_gamma", 0}}};
  for (const nlohmann::json& options : bad) {
    try {
      EmaRun run(plugins, options);
      ADD_FAILURE() << options.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::recipe) << options.dump();
      EXPECT_EQ(e.key_path().rfind("c.", 0), 0u) << e.key_path();
    }
  }
}

}  // namespace
}  // namespace mixt
