// The sync-free loss-scaled step: mixt::GradScaler hands a fused optimizer (sgd, adamw with
// fused: true) its scale and found-inf flag (Optimizer::step_scaled) instead of reading the
// flag on the host. The reference is the same optimizer driven down GradScaler's general,
// synchronising path (GradScalerOptions::step_on_device = false), which the parity tests
// check against torch.amp.GradScaler: over a recorded run with overflowing, inf and NaN
// gradients, a skipped first step among them, both must give equal parameters, optimizer
// state, scale and growth tracker after every step.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "mixt/error.h"
#include "mixt/helpers/grad_scaler.h"
#include "operator_calls.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::vector<std::vector<std::int64_t>> kShapes = {{5, 3}, {3}, {7}};

// The CPU, and CUDA where there is a GPU (the GPU run): the CUDA kernels are other code.
std::vector<at::Device> devices() {
  std::vector<at::Device> all{at::kCPU};
  if (torch::cuda::is_available()) all.emplace_back(at::kCUDA);
  return all;
}

// What each recorded step's gradient is: finite, overflowing once scaled, or holding an
// inf or a NaN. The first is skipped by every optimizer before it has any state.
enum class Gradient { finite, overflow, inf, nan };
const std::vector<Gradient> kSequence = {Gradient::overflow, Gradient::finite, Gradient::finite,   Gradient::inf,
                                         Gradient::finite,   Gradient::finite, Gradient::nan,      Gradient::finite,
                                         Gradient::finite,   Gradient::finite, Gradient::overflow, Gradient::finite};

std::vector<at::Tensor> gradients_of_step(std::size_t step, Gradient kind) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  std::vector<at::Tensor> grads;
  for (const auto& shape : kShapes) grads.push_back(at::randn(shape, generator));
  if (kind == Gradient::overflow) {
    for (auto& g : grads) g = g * 1e36;  // finite, but scale * g overflows float32
  }
  if (kind == Gradient::inf) grads[1].view(-1)[1] = std::numeric_limits<float>::infinity();
  if (kind == Gradient::nan) grads[2].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  return grads;
}

std::unique_ptr<Optimizer> make_optimizer(const testing::BuiltPlugins& plugins, const std::string& recipe,
                                          const std::vector<at::Tensor>& params) {
  const RecipeNodePtr root = parse_yaml("optimizer: " + recipe, "test");
  OptimizerContext context;
  for (std::size_t i = 0; i < params.size(); ++i) {
    context.named_parameters.emplace_back(std::string(i == 1 ? "bias" : "p").append(std::to_string(i)), params[i]);
  }
  return plugins.registry.make_optimizer(Config(root, "").section("optimizer"), context);
}

// The optimizer's state as it checkpoints it, by key.
std::map<std::string, at::Tensor> state_of(Optimizer& optimizer) {
  torch::serialize::OutputArchive out;
  optimizer.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream source(bytes.str());
  in.load_from(source);
  std::map<std::string, at::Tensor> state;
  for (const std::string& key : in.keys()) {
    at::Tensor value;
    in.read(key, value);
    state[key] = value;
  }
  return state;
}

// Equal, where a state the one path has not made yet (no momentum buffer, no step count
// after a skipped first step) equals zeros in the other, which its next step treats the same.
void expect_same_state(Optimizer& sync_free, Optimizer& synchronising, const std::string& where) {
  auto a = state_of(sync_free), b = state_of(synchronising);
  for (const auto* side : {&a, &b}) {
    const auto* other = side == &a ? &b : &a;
    for (const auto& [key, value] : *side) {
      const auto found = other->find(key);
      if (found == other->end()) {
        EXPECT_TRUE(at::equal(value, at::zeros_like(value))) << key << " exists on one path only, " << where;
      } else {
        EXPECT_TRUE(at::equal(value.to(at::kCPU), found->second.to(at::kCPU))) << key << ", " << where;
      }
    }
  }
}

struct Run {
  std::vector<at::Tensor> params;
  std::unique_ptr<Optimizer> optimizer;
  GradScaler scaler;
};

Run make_run(const testing::BuiltPlugins& plugins, const std::string& recipe, bool step_on_device,
             const at::Device& device) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  std::vector<at::Tensor> params;
  for (const auto& shape : kShapes) params.push_back(at::randn(shape, generator).to(device).set_requires_grad(true));
  GradScalerOptions options;
  options.init_scale = 16384.0;
  options.growth_interval = 3;  // the scale grows during the run as well as backing off
  options.step_on_device = step_on_device;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(plugins, recipe, params);
  return Run{std::move(params), std::move(optimizer), GradScaler(options)};
}

// One recorded step; returns whether it was applied (read after update()).
bool take_step(Run& run, std::size_t step, bool clip) {
  run.optimizer->zero_grad();
  const std::vector<at::Tensor> grads = gradients_of_step(step, kSequence[step]);
  at::Tensor loss = at::zeros({}, run.params[0].options());
  for (std::size_t i = 0; i < grads.size(); ++i)
    loss = loss + (run.params[i] * grads[i].to(run.params[i].device())).sum();
  run.scaler.scale(loss).backward();
  if (clip) {
    run.scaler.unscale_(*run.optimizer);
    torch::nn::utils::clip_grad_norm_(run.params, 1.0);
  }
  const StepOutcome outcome = run.scaler.step(*run.optimizer);
  run.scaler.update();
  return outcome.applied();
}

void expect_sync_free_equals_synchronising(const std::string& recipe, bool clip, const at::Device& device) {
  testing::BuiltPlugins plugins;
  Run sync_free = make_run(plugins, recipe, true, device), synchronising = make_run(plugins, recipe, false, device);
  ASSERT_TRUE(sync_free.optimizer->can_step_scaled()) << recipe;
  std::int64_t skipped = 0;
  for (std::size_t step = 0; step < kSequence.size(); ++step) {
    const std::string where =
        recipe + (clip ? ", unscale_ + clip" : "") + " on " + device.str() + ", step " + std::to_string(step);
    const bool applied = take_step(sync_free, step, clip);
    ASSERT_EQ(applied, take_step(synchronising, step, clip)) << where;
    EXPECT_EQ(applied, kSequence[step] == Gradient::finite) << where;
    skipped += !applied;
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      ASSERT_TRUE(at::isfinite(sync_free.params[i]).all().item<bool>()) << "param " << i << ", " << where;
      EXPECT_TRUE(at::equal(sync_free.params[i], synchronising.params[i])) << "param " << i << ", " << where;
    }
    expect_same_state(*sync_free.optimizer, *synchronising.optimizer, where);
    const GradScalerState a = *sync_free.scaler.state_dict(), b = *synchronising.scaler.state_dict();
    EXPECT_EQ(a.scale, b.scale) << where;
    EXPECT_EQ(a.growth_tracker, b.growth_tracker) << where;
  }
  EXPECT_EQ(skipped, 4);
}

const char* const kFusedOptimizers[] = {
    "{name: sgd, lr: 0.05, momentum: 0.9, fused: true}",
    "{name: sgd, lr: 0.05, momentum: 0.9, dampening: 0.3, fused: true}",
    "{name: sgd, lr: 0.02, momentum: 0.8, nesterov: true, weight_decay: 0.01, fused: true}",
    "{name: sgd, lr: 0.05, weight_decay: 0.01, fused: true}",
    "{name: adamw, lr: 0.01, weight_decay: 0.01, fused: true}",
    "{name: adamw, lr: 0.01, weight_decay: 0.01, amsgrad: true, fused: true}",
};

TEST(SyncFreeStep, EqualsTheSynchronisingPathWithASkippedFirstStep) {
  for (const at::Device& device : devices()) {
    for (const char* recipe : kFusedOptimizers) expect_sync_free_equals_synchronising(recipe, false, device);
  }
}

TEST(SyncFreeStep, EqualsTheSynchronisingPathAfterUnscaleAndClipping) {
  for (const at::Device& device : devices()) {
    for (const char* recipe : kFusedOptimizers) expect_sync_free_equals_synchronising(recipe, /*clip=*/true, device);
  }
}

// torch 2.11's fused SGD reads an uninitialised momentum buffer after a skipped first step
// (tests/golden/torch_fused_sgd_skip.py): mixt's equals the run without that step.
TEST(SyncFreeStep, ASkippedFirstStepLeavesMomentumAsIfItHadNotHappened) {
  for (const char* recipe : {"{name: sgd, lr: 0.1, momentum: 0.9, fused: true}",
                             "{name: sgd, lr: 0.1, momentum: 0.9, dampening: 0.5, fused: true}"}) {
    testing::BuiltPlugins plugins;
    for (const at::Device& device : devices()) {
      auto run_of = [&](bool skip_first) {
        at::Tensor param = at::ones({4}, at::TensorOptions().device(device)).set_requires_grad(true);
        std::unique_ptr<Optimizer> optimizer = make_optimizer(plugins, recipe, {param});
        GradScalerOptions options;
        options.init_scale = 4.0;
        GradScaler scaler(options);
        for (const double magnitude :
             skip_first ? std::vector<double>{1e38, 1.0, 1.0} : std::vector<double>{1.0, 1.0}) {
          optimizer->zero_grad();
          scaler.scale((param * magnitude).sum()).backward();
          scaler.step(*optimizer);
          scaler.update();
        }
        return param.detach().cpu();
      };
      // The skipping run backs off 4 -> 2: powers of two, so the unscaled gradients are equal.
      EXPECT_TRUE(at::equal(run_of(true), run_of(false))) << recipe << " on " << device;
    }
  }
}

// No host read in the step: dampening 0 starts buffers at zero; dampening != 0 reads
// found_inf once per step only until its buffers exist.
std::int64_t reads_in_steps(const std::string& recipe, const std::vector<double>& magnitudes,
                            const at::Device& device = at::kCPU) {
  testing::BuiltPlugins plugins;
  at::Tensor param = at::ones({4}, at::TensorOptions().device(device)).set_requires_grad(true);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(plugins, recipe, {param});
  GradScaler scaler;
  const std::vector<std::string> calls = testing::operators_called_during([&] {
    for (const double magnitude : magnitudes) {
      optimizer->zero_grad();
      scaler.scale((param * magnitude).sum()).backward();
      scaler.step(*optimizer);
      scaler.update();
    }
  });
  return std::count(calls.begin(), calls.end(), "aten::_local_scalar_dense");
}

TEST(SyncFreeStep, ReadsNothingOnTheHostExceptForADampenedFirstStep) {
  const std::vector<double> skip_skip_then_four = {1e36, 1e36, 1, 1, 1, 1};
  EXPECT_EQ(reads_in_steps("{name: sgd, lr: 0.1, momentum: 0.9, fused: true}", skip_skip_then_four), 0);
  EXPECT_EQ(reads_in_steps("{name: sgd, lr: 0.1, fused: true}", skip_skip_then_four), 0);
  // The CPU kernel of fused AdamW reads each step counter itself (FusedAdamKernel.cpp:
  // `state_step.item<float>()`, a CPU tensor there, so no synchronisation; the CUDA kernel
  // reads it on the device): one per parameter and applied step, none for a skipped one.
  EXPECT_EQ(reads_in_steps("{name: adamw, fused: true}", skip_skip_then_four), 4);
  EXPECT_EQ(reads_in_steps("{name: sgd, lr: 0.1, momentum: 0.9, dampening: 0.1, fused: true}", skip_skip_then_four), 3)
      << "two skipped steps and the first applied one, then none";
  EXPECT_EQ(reads_in_steps("{name: sgd, lr: 0.1, momentum: 0.9}", skip_skip_then_four), 6)
      << "the general path reads every step";
  if (torch::cuda::is_available()) {  // there the AdamW kernel reads its step counters on the device
    EXPECT_EQ(reads_in_steps("{name: adamw, fused: true}", skip_skip_then_four, at::kCUDA), 0);
    EXPECT_EQ(reads_in_steps("{name: sgd, lr: 0.1, momentum: 0.9, fused: true}", skip_skip_then_four, at::kCUDA), 0);
  }
}

// update() adds the optimizers' flags into the first one in place (as Python does): the
// outcome step() returned must keep its own optimizer's flag.
TEST(SyncFreeStep, AnOutcomeReadAfterUpdateIsItsOwnOptimizers) {
  testing::BuiltPlugins plugins;
  at::Tensor a = at::ones({3}).set_requires_grad(true), b = at::ones({3}).set_requires_grad(true);
  std::unique_ptr<Optimizer> first = make_optimizer(plugins, "{name: sgd, lr: 0.1, fused: true}", {a});
  std::unique_ptr<Optimizer> second = make_optimizer(plugins, "{name: sgd, lr: 0.1, fused: true}", {b});
  GradScaler scaler;
  scaler.scale((a * 1.0).sum() + (b * std::numeric_limits<float>::infinity()).sum()).backward();
  const StepOutcome stepped = scaler.step(*first), skipped = scaler.step(*second);
  EXPECT_FALSE(stepped.known()) << "decided on the device";
  scaler.update();
  EXPECT_TRUE(stepped.applied());
  EXPECT_FALSE(skipped.applied());
  EXPECT_EQ(scaler.get_scale(), 32768.0);
}

TEST(SyncFreeStep, OnlyFusedOptimizersStepScaled) {
  testing::BuiltPlugins plugins;
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  for (const char* recipe : {"{name: sgd, lr: 0.1}", "{name: adamw, foreach: true}", "{name: adamw}"}) {
    std::unique_ptr<Optimizer> optimizer = make_optimizer(plugins, recipe, {p});
    EXPECT_FALSE(optimizer->can_step_scaled()) << recipe;
    EXPECT_THROW(optimizer->step_scaled(at::Tensor(), at::zeros({})), Error) << recipe;
  }
  EXPECT_TRUE(make_optimizer(plugins, "{name: adamw, fused: true}", {p})->can_step_scaled());
}

TEST(StepOutcome, ConvertsFromAndToBoolAndReadsADeviceFlagOnce) {
  const StepOutcome applied = true, skipped = false;
  EXPECT_TRUE(applied.known());
  EXPECT_TRUE(applied);
  EXPECT_FALSE(skipped);
  EXPECT_TRUE(at::equal(skipped.skipped_flag(at::kCPU), at::ones({})));
  const StepOutcome on_device = StepOutcome::skipped_if(at::ones({}));
  EXPECT_FALSE(on_device.known());
  const std::vector<std::string> calls = testing::operators_called_during([&] {
    EXPECT_FALSE(on_device.applied());
    EXPECT_FALSE(on_device.applied());
  });
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "aten::_local_scalar_dense"), 1) << "read once, then cached";
  EXPECT_THROW(StepOutcome::skipped_if(at::ones({2})), Error);
  EXPECT_THROW(StepOutcome::skipped_if(at::ones({}, at::kInt)), Error);
}

}  // namespace
}  // namespace mixt
