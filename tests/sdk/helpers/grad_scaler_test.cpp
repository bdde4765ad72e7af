// mixt::GradScaler's behaviour beyond the golden run: defaults, lazy init, the errors
// Python raises on misuse, disabled mode, and state_dict round trips through a checkpoint.
#include "mixt/helpers/grad_scaler.h"

#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <limits>

#include "mixt/error.h"
#include "mixt/helpers/torch_optimizer.h"

#include "expect_error.h"

namespace mixt {
namespace {

struct Problem {
  at::Tensor weight = at::ones({3}).set_requires_grad(true);
  TorchOptimizer optimizer{std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{weight},
                                                               torch::optim::SGDOptions(0.1))};
  at::Tensor loss(float value = 1.0f) { return (weight * value).sum(); }
};

std::string error_of(const std::function<void()>& f) { return testing::thrown_error(f).message(); }

TEST(GradScaler, DefaultsAreTorchs) {
  GradScaler scaler;
  const GradScalerState state = *scaler.state_dict();
  EXPECT_EQ(state.scale, 65536.0);
  EXPECT_EQ(state.growth_factor, 2.0);
  EXPECT_EQ(state.backoff_factor, 0.5);
  EXPECT_EQ(state.growth_interval, 2000);
  EXPECT_EQ(state.growth_tracker, 0);
  EXPECT_FALSE(scaler.scale_tensor().defined()) << "the scale tensor is created lazily";
}

TEST(GradScaler, ScalesStepsAndBacksOff) {
  Problem p;
  GradScaler scaler({8.0, 2.0, 0.5, 2, true});
  scaler.scale(p.loss()).backward();
  EXPECT_TRUE(at::equal(p.weight.grad(), at::full({3}, 8.0f)));
  EXPECT_TRUE(scaler.step(p.optimizer));
  EXPECT_TRUE(at::allclose(p.weight.detach(), at::full({3}, 0.9f)));  // unscaled gradient 1, lr 0.1
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);

  p.optimizer.zero_grad();
  scaler.scale(p.loss(std::numeric_limits<float>::infinity())).backward();
  EXPECT_FALSE(scaler.step(p.optimizer));
  EXPECT_TRUE(at::allclose(p.weight.detach(), at::full({3}, 0.9f))) << "a skipped step leaves the weights";
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// Stands in for the other ranks of a data-parallel run: one of them overflowed, so the
// max all-reduce of found-inf comes back 1 whatever this rank saw.
class OtherRankOverflowed : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce(at::Tensor& tensor, ReduceOp op) const override {
    ++calls;
    EXPECT_EQ(op, ReduceOp::max);
    tensor.fill_(1.0);
  }
  void broadcast(at::Tensor&, int) const override {}
  void barrier() const override {}
  mutable int calls = 0;
};

// What a policy composing the scaler reads instead of keeping flags of its own: whether the
// gradients are unscaled already, and whether the last step was skipped.
TEST(GradScaler, SaysWhetherGradientsAreUnscaledAndWhetherTheLastStepFoundInf) {
  Problem p;
  GradScaler scaler({8.0, 2.0, 0.5, 2, true});
  EXPECT_FALSE(scaler.unscaled(p.optimizer));
  EXPECT_FALSE(scaler.found_inf().defined()) << "no update yet";
  scaler.scale(p.loss()).backward();
  EXPECT_FALSE(scaler.unscaled(p.optimizer));
  scaler.unscale_(p.optimizer);
  EXPECT_TRUE(scaler.unscaled(p.optimizer));
  EXPECT_TRUE(at::equal(p.weight.grad(), at::ones({3}))) << "8 / 8";
  EXPECT_TRUE(scaler.step(p.optimizer));
  EXPECT_TRUE(scaler.unscaled(p.optimizer));
  scaler.update();
  EXPECT_FALSE(scaler.unscaled(p.optimizer)) << "update() starts the next step";
  EXPECT_EQ(scaler.found_inf().item<float>(), 0.0f);

  p.optimizer.zero_grad();
  scaler.scale(p.loss(std::numeric_limits<float>::infinity())).backward();
  EXPECT_FALSE(scaler.step(p.optimizer));
  EXPECT_TRUE(scaler.unscaled(p.optimizer)) << "step() unscaled them";
  scaler.update();
  EXPECT_GT(scaler.found_inf().item<float>(), 0.0f);
  scaler.update(16.0);
  EXPECT_GT(scaler.found_inf().item<float>(), 0.0f) << "a new scale keeps the last step's flag";

  GradScaler disabled({8.0, 2.0, 0.5, 2, false});
  EXPECT_TRUE(disabled.step(p.optimizer));
  EXPECT_FALSE(disabled.unscaled(p.optimizer));
  EXPECT_FALSE(disabled.found_inf().defined());
}

TEST(GradScaler, FoundInfIsAgreedAcrossRanksBeforeTheStepDecision) {
  Problem p;
  OtherRankOverflowed others;
  GradScalerOptions options{8.0, 2.0, 0.5, 2, true};
  options.communicator = &others;
  GradScaler scaler(options);
  scaler.scale(p.loss()).backward();  // finite here
  EXPECT_FALSE(scaler.step(p.optimizer)) << "the other rank's overflow must skip this rank's step too";
  EXPECT_TRUE(at::equal(p.weight.detach(), at::ones({3})));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0) << "and back the scale off the same way";
  EXPECT_EQ(others.calls, 1);
}

TEST(GradScaler, MisuseRaisesPythonsErrors) {
  Problem p;
  GradScaler scaler;
  EXPECT_EQ(error_of([&] { scaler.unscale_(p.optimizer); }),
            "Attempted unscale_ but _scale is None.  This may indicate your script did not use "
            "scaler.scale(loss or outputs) earlier in the iteration.");
  scaler.scale(p.loss()).backward();
  scaler.unscale_(p.optimizer);
  EXPECT_EQ(error_of([&] { scaler.unscale_(p.optimizer); }),
            "unscale_() has already been called on this optimizer since the last update().");
  scaler.step(p.optimizer);
  EXPECT_EQ(error_of([&] { scaler.unscale_(p.optimizer); }), "unscale_() is being called after step().");
  EXPECT_EQ(error_of([&] { scaler.step(p.optimizer); }), "step() has already been called since the last update().");
  scaler.update();
  GradScaler fresh;
  fresh.scale(p.loss());
  EXPECT_EQ(error_of([&] { fresh.update(); }), "No inf checks were recorded prior to update.");
  EXPECT_EQ(error_of([] { GradScaler({65536.0, 1.0, 0.5, 2000, true}); }), "The growth factor must be > 1.0.");
  EXPECT_EQ(error_of([] { GradScaler({65536.0, 2.0, 1.0, 2000, true}); }), "The backoff factor must be < 1.0.");
}

TEST(GradScaler, RefusesFloat16Gradients) {
  at::Tensor half = at::ones({2}, at::kHalf).set_requires_grad(true);
  TorchOptimizer optimizer(std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{half},
                                                               torch::optim::SGDOptions(0.1)));
  GradScaler scaler;
  scaler.scale(half.sum()).backward();
  EXPECT_EQ(error_of([&] { scaler.step(optimizer); }), "Attempting to unscale FP16 gradients.");
}

TEST(GradScaler, DisabledOnlySteps) {
  Problem p;
  GradScaler scaler({65536.0, 2.0, 0.5, 2000, false});
  const at::Tensor loss = p.loss();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  EXPECT_TRUE(scaler.step(p.optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_FALSE(scaler.state_dict().has_value());
}

TEST(GradScaler, StateRoundTripsThroughAnArchive) {
  Problem p;
  GradScaler scaler({1024.0, 2.0, 0.5, 3, true});
  for (int i = 0; i < 2; ++i) {
    p.optimizer.zero_grad();
    scaler.scale(p.loss()).backward();
    scaler.step(p.optimizer);
    scaler.update();
  }
  torch::serialize::OutputArchive out;
  scaler.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream stream(bytes.str());
  in.load_from(stream);
  GradScaler restored;
  restored.load(in);
  const GradScalerState state = *restored.state_dict();
  EXPECT_EQ(state.scale, 1024.0);
  EXPECT_EQ(state.growth_interval, 3);
  EXPECT_EQ(state.growth_tracker, 2);
  // The restored tracker counts on: one more finite step reaches the interval and grows.
  p.optimizer.zero_grad();
  restored.scale(p.loss()).backward();
  restored.step(p.optimizer);
  restored.update();
  EXPECT_EQ(restored.get_scale(), 2048.0);

  torch::serialize::OutputArchive empty;
  GradScaler({65536.0, 2.0, 0.5, 2000, false}).save(empty);
  std::ostringstream empty_bytes;
  empty.save_to(empty_bytes);
  torch::serialize::InputArchive empty_in;
  std::istringstream empty_stream(empty_bytes.str());
  empty_in.load_from(empty_stream);
  EXPECT_EQ(error_of([&] { GradScaler().load(empty_in); }),
            "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
}

}  // namespace
}  // namespace mixt
