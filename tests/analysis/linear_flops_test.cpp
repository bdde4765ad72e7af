// analysis/linear_flops.h: the linear layers' FLOPs of one forward pass, counted per call
// (2 x rows x in x out, the figures below by hand), the policy's share, and the layers'
// own functions left as they were.
#include "analysis/linear_flops.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>

#include <memory>

#include "mixt/helpers/linear.h"

namespace mixt {
namespace {

// fc1: 8 -> 4, fc2: 4 -> 2, and a convolution, which is no linear layer.
struct TwoLinears : torch::nn::Module {
  TwoLinears() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 1, 3)));
    fc1 = register_module("fc1", Linear(8, 4));
    fc2 = register_module("fc2", Linear(4, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(fc1->forward(x)); }
  torch::nn::Conv2d conv{nullptr};
  Linear fc1{nullptr}, fc2{nullptr};
};

// What a policy installs: computes the layer its own way (here: twice at::linear).
struct Doubling : LinearFunction {
  at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) override {
    return 2 * at::linear(input, weight, bias);
  }
};

TEST(LinearFlops, CountsTwoTimesRowsTimesInTimesOutPerLayer) {
  const auto model_ptr = std::make_shared<TwoLinears>();  // named_modules() needs the shared_ptr
  TwoLinears& model = *model_ptr;
  const LinearFlops count = count_linear_flops(model, [&] { model.forward(torch::zeros({5, 8})); });
  EXPECT_EQ(count.layers, 2u);
  EXPECT_EQ(count.flops, 2.0 * 5 * 8 * 4 + 2.0 * 5 * 4 * 2);  // 320 + 80
  EXPECT_EQ(count.policy_layers, 0u);
  EXPECT_EQ(count.policy_flops, 0.0);
}

TEST(LinearFlops, EveryLeadingAxisIsRowsAndEveryCallCounts) {
  const auto model_ptr = std::make_shared<TwoLinears>();  // named_modules() needs the shared_ptr
  TwoLinears& model = *model_ptr;
  const LinearFlops count = count_linear_flops(model, [&] {
    const at::Tensor x = torch::zeros({2, 3, 8});  // 6 rows
    model.forward(x);
    model.fc1->forward(x);  // fc1 once more
  });
  EXPECT_EQ(count.flops, (2.0 * 6 * 8 * 4 + 2.0 * 6 * 4 * 2) + 2.0 * 6 * 8 * 4);
}

TEST(LinearFlops, ThePolicysLayersStillComputeTheirWayAndKeepTheirFunction) {
  const auto model_ptr = std::make_shared<TwoLinears>();  // named_modules() needs the shared_ptr
  TwoLinears& model = *model_ptr;
  const auto doubling = std::make_shared<Doubling>();
  model.fc1->set_linear_function("", doubling);
  const at::Tensor x = torch::randn({5, 8});
  const at::Tensor expected = model.forward(x);
  at::Tensor counted;
  const LinearFlops count = count_linear_flops(model, [&] { counted = model.forward(x); });
  EXPECT_EQ(count.policy_layers, 1u);
  EXPECT_EQ(count.policy_flops, 2.0 * 5 * 8 * 4);
  EXPECT_EQ(count.flops, 2.0 * 5 * 8 * 4 + 2.0 * 5 * 4 * 2);
  EXPECT_TRUE(torch::equal(counted, expected));
  EXPECT_EQ(model.fc1->linear_function(""), doubling);
  EXPECT_EQ(model.fc2->linear_function(""), nullptr);
}

TEST(LinearFlops, AFailingPassLeavesTheFunctionsAsTheyWere) {
  const auto model_ptr = std::make_shared<TwoLinears>();  // named_modules() needs the shared_ptr
  TwoLinears& model = *model_ptr;
  const auto doubling = std::make_shared<Doubling>();
  model.fc2->set_linear_function("", doubling);
  bool counting = false;  // the pass fails with the counters in place
  EXPECT_THROW(count_linear_flops(model,
                                  [&] {
                                    counting = model.fc1->linear_function("") != nullptr;
                                    model.forward(torch::zeros({5, 7}));
                                  }),
               c10::Error);
  EXPECT_TRUE(counting);
  EXPECT_EQ(model.fc1->linear_function(""), nullptr);
  EXPECT_EQ(model.fc2->linear_function(""), doubling);
}

TEST(LinearFlops, AModelWithoutLinearLayersIsNotRun) {
  const auto model = std::make_shared<torch::nn::Module>();
  model->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 1, 3)));
  bool ran = false;
  const LinearFlops count = count_linear_flops(*model, [&] { ran = true; });
  EXPECT_EQ(count.layers, 0u);
  EXPECT_EQ(count.flops, 0.0);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace mixt
