// mixt::GradScaler against torch.amp.GradScaler on a 300-step recorded run (two optimizers
// on one scaler, accumulation, clipping, injected inf/NaN, float32 overflow of the scaled
// gradients). Golden: tests/golden/grad_scaler.json from tests/golden/make_grad_scaler_golden.py.
// After every step: the same scale and growth tracker (exactly), the same optimizers skipped,
// and the same parameters (float32; bitwise or within 1e-7 relative).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <limits>

#include "mixt/grad_scaler.h"
#include "mixt/torch_optimizer.h"
#include "test_support.h"

namespace mixt {
namespace {

double decode(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  const std::string text = value.get<std::string>();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  return text == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

at::Tensor tensor_of(const nlohmann::json& values, const std::vector<std::int64_t>& shape) {
  std::vector<float> data;
  for (const auto& v : values) data.push_back(static_cast<float>(decode(v)));
  return at::tensor(data, at::kFloat).reshape(shape);
}

TEST(GradScalerParity, SameScaleSkipsAndParametersAsTorchGradScaler) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(std::string(MIXT_SOURCE_DIR) + "/tests/golden/grad_scaler.json"));
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& s : golden.at("shapes")) shapes.push_back(s.get<std::vector<std::int64_t>>());
  std::vector<at::Tensor> params;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(tensor_of(golden.at("initial")[i], shapes[i]).set_requires_grad(true));
  }
  const auto& sgd_options = golden.at("sgd");
  const auto& adamw_options = golden.at("adamw");
  TorchOptimizer sgd(std::make_unique<torch::optim::SGD>(
      std::vector<at::Tensor>{params[0], params[1]},
      torch::optim::SGDOptions(sgd_options.at("lr").get<double>()).momentum(sgd_options.at("momentum").get<double>())));
  TorchOptimizer adamw(std::make_unique<torch::optim::AdamW>(
      std::vector<at::Tensor>{params[2]}, torch::optim::AdamWOptions(adamw_options.at("lr").get<double>())
                                              .weight_decay(adamw_options.at("weight_decay").get<double>())));
  const auto& s = golden.at("scaler");
  GradScaler scaler({s.at("init_scale").get<double>(), s.at("growth_factor").get<double>(),
                     s.at("backoff_factor").get<double>(), s.at("growth_interval").get<std::int64_t>(), true});
  const double max_norm = golden.at("clip_max_norm").get<double>();

  std::int64_t step = 0, skipped = 0, bitwise = 0, elements = 0;
  double worst_relative = 0;
  for (const auto& expected : golden.at("steps")) {
    ++step;
    sgd.zero_grad();
    adamw.zero_grad();
    for (const auto& micro : expected.at("micro")) {
      at::Tensor loss = at::zeros({});
      for (std::size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * tensor_of(micro[i], shapes[i])).sum();
      scaler.scale(loss).backward();
    }
    if (expected.at("clip").get<bool>()) {
      scaler.unscale_(sgd);
      scaler.unscale_(adamw);
      torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{params[0], params[1]}, max_norm);
      torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{params[2]}, max_norm);
    }
    const bool sgd_applied = scaler.step(sgd);
    const bool adamw_applied = scaler.step(adamw);
    scaler.update();
    skipped += !sgd_applied + !adamw_applied;

    ASSERT_EQ(sgd_applied, expected.at("applied")[0].get<bool>()) << "step " << step;
    ASSERT_EQ(adamw_applied, expected.at("applied")[1].get<bool>()) << "step " << step;
    const GradScalerState state = *scaler.state_dict();
    ASSERT_EQ(state.scale, decode(expected.at("scale"))) << "step " << step;
    ASSERT_EQ(state.growth_tracker, expected.at("growth_tracker").get<std::int64_t>()) << "step " << step;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const at::Tensor want = tensor_of(expected.at("params")[i], shapes[i]);
      const at::Tensor got = params[i].detach();
      ASSERT_TRUE(at::isfinite(got).all().item<bool>()) << "step " << step;
      bitwise += at::eq(got, want).sum().item<std::int64_t>();
      elements += got.numel();
      const double relative = ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item<double>();
      worst_relative = std::max(worst_relative, relative);
      ASSERT_LE(relative, 1e-7) << "param " << i << " at step " << step;
    }
  }
  EXPECT_GT(skipped, 10) << "the golden run must exercise skipping";
  std::printf("GradScaler parity: %lld steps, %lld optimizer steps skipped, %lld/%lld parameter values bitwise "
              "equal, worst relative difference %.3g\n",
              static_cast<long long>(step), static_cast<long long>(skipped), static_cast<long long>(bitwise),
              static_cast<long long>(elements), worst_relative);
}

}  // namespace
}  // namespace mixt
