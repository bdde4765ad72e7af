// mixt::recompute_in_backward (mixt/helpers/activation_checkpointing.h): a block whose
// forward runs again in the backward pass must give the gradients, the random draws, the
// autocast dtypes and the batch-norm statistics of the plain block, bit for bit. The
// reference is the same block called directly, with the same seed.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <string>
#include <vector>

#include "mixt/autocast.h"
#include "mixt/helpers/activation_checkpointing.h"
#include "mixt/helpers/batch_norm.h"
#include "mixt/helpers/fp32_modules.h"

namespace mixt {
namespace {

// conv → batch norm → relu → dropout: parameters, running statistics and random draws.
// Called twice per step: the first call sees the data, the second the first one's output.
template <class Norm>
struct Block : torch::nn::Module {
  Block() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 3, 3).padding(1)));
    norm = register_module("norm", Norm(3));
    dropout = register_module("dropout", torch::nn::Dropout(0.3));
  }
  at::Tensor forward(const at::Tensor& x) { return dropout->forward(norm->forward(conv->forward(x)).relu()); }
  torch::nn::Conv2d conv{nullptr};
  Norm norm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};

struct Outcome {
  at::Tensor output, input_grad, after;  // `after`: a draw from the generator once backward is done
  std::vector<at::Tensor> grads, buffers;
};

// Two calls of `block` on one batch, a loss, backward: plain or recomputed.
template <class Model>
Outcome train_once(Model& block, bool recompute, bool input_requires_grad = true) {
  at::manual_seed(7);
  const at::Tensor x = at::randn({4, 3, 8, 8}).requires_grad_(input_requires_grad);
  const auto call = [&](const at::Tensor& in) {
    return recompute ? recompute_in_backward([&block](const at::Tensor& b) { return block.forward(b); }, in)
                     : block.forward(in);
  };
  const at::Tensor y = call(call(x) * 0.5 + 0.1);
  (y * at::linspace(-1, 1, y.numel()).view_as(y)).sum().backward();
  Outcome o;
  o.output = y.detach();
  if (input_requires_grad) o.input_grad = x.grad().clone();
  for (const auto& p : block.parameters()) o.grads.push_back(p.grad().clone());
  for (const auto& b : block.buffers()) o.buffers.push_back(b.clone());
  o.after = at::rand({3});
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_TRUE(at::equal(a.output, b.output)) << what << ": output";
  if (a.input_grad.defined()) {
    EXPECT_TRUE(at::equal(a.input_grad, b.input_grad)) << what << ": input gradient";
  }
  ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
  for (std::size_t i = 0; i < a.grads.size(); ++i) EXPECT_TRUE(at::equal(a.grads[i], b.grads[i])) << what << ": grad " << i;
  ASSERT_EQ(a.buffers.size(), b.buffers.size()) << what;
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_TRUE(at::equal(a.buffers[i], b.buffers[i])) << what << ": buffer " << i << " (running statistics)";
  }
  EXPECT_TRUE(at::equal(a.after, b.after)) << what << ": the generator after backward";
}

template <class Model>
Outcome fresh(bool recompute, bool input_requires_grad = true) {
  at::manual_seed(0);
  Model block;
  block.train();
  return train_once(block, recompute, input_requires_grad);
}

using MixtBlock = Block<mixt::BatchNorm2d>;
using TorchBlock = Block<torch::nn::BatchNorm2d>;

TEST(RecomputeInBackward, GradientsDropoutAndRunningStatisticsAreThoseOfThePlainBlock) {
  expect_same(fresh<MixtBlock>(false), fresh<MixtBlock>(true), "mixt::BatchNorm2d");
}

// What the test above would catch: torch::nn::BatchNorm2d knows nothing of recomputation and
// updates its running statistics a second time (as under torch.utils.checkpoint), while its
// gradients are still exact.
TEST(RecomputeInBackward, ATorchBatchNormUpdatesItsStatisticsTwiceAndTheComparisonSeesIt) {
  const Outcome plain = fresh<TorchBlock>(false), recomputed = fresh<TorchBlock>(true);
  for (std::size_t i = 0; i < plain.grads.size(); ++i) EXPECT_TRUE(at::equal(plain.grads[i], recomputed.grads[i])) << i;
  ASSERT_EQ(plain.buffers.size(), 3U);  // running_mean, running_var, num_batches_tracked
  EXPECT_FALSE(at::equal(plain.buffers[0], recomputed.buffers[0]));
  EXPECT_EQ(plain.buffers[2].item<std::int64_t>(), 2);
  EXPECT_EQ(recomputed.buffers[2].item<std::int64_t>(), 4);
}

// An input that needs no gradient (the first block sees the data): the parameters still
// get theirs.
TEST(RecomputeInBackward, ParametersGetGradientsWhenTheInputNeedsNone) {
  expect_same(fresh<MixtBlock>(false, false), fresh<MixtBlock>(true, false), "input without grad");
}

// The recomputation runs in the backward pass, outside the forward's autocast region: it
// must enter the region the first run saw, or its matmuls would run in float32.
TEST(RecomputeInBackward, TheRecomputedForwardRunsUnderTheFirstRunsAutocast) {
  const auto run = [](bool recompute) {
    at::manual_seed(0);
    torch::nn::Linear linear(16, 8);
    const at::Tensor x = at::randn({5, 16}).requires_grad_();
    at::Tensor y;
    {
      AutocastScope scope(at::kCPU, at::kBFloat16);
      auto body = [linear](const at::Tensor& in) mutable { return linear->forward(in).tanh(); };
      y = recompute ? recompute_in_backward(body, x) : body(x);
    }
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    y.to(at::kFloat).pow(2).sum().backward();
    return std::vector<at::Tensor>{x.grad(), linear->weight.grad(), linear->bias.grad()};
  };
  const auto plain = run(false), recomputed = run(true);
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(plain[i], recomputed[i])) << i;
}

// Without grad (evaluation) it is the plain call: nothing is kept for a backward pass.
TEST(RecomputeInBackward, UnderNoGradItIsThePlainCall) {
  at::NoGradGuard no_grad;
  int calls = 0;
  const at::Tensor x = at::randn({2, 3});
  const at::Tensor y = recompute_in_backward(
      [&calls](const at::Tensor& in) {
        ++calls;
        return in * 2;
      },
      x);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(at::equal(y, x * 2));
}

// The block's forward runs once in the forward pass and once more in the backward pass, and
// not while the backward pass runs through the rest of the graph.
TEST(RecomputeInBackward, TheBlockRunsAgainOnceDuringBackward) {
  int calls = 0;
  bool recomputing_seen = false;
  torch::nn::Linear linear(4, 4);
  const at::Tensor x = at::randn({3, 4}).requires_grad_();
  const at::Tensor y = recompute_in_backward(
      [&, linear](const at::Tensor& in) mutable {
        ++calls;
        recomputing_seen |= recomputing();
        return linear->forward(in);
      },
      x);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(recomputing_seen);
  y.sum().backward();
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(recomputing_seen);
  EXPECT_FALSE(recomputing()) << "only while the block is recomputed";
}

// The recipe's choice through call_submodule/call_block: `all` recomputes the blocks, a
// list the submodules it names; the routed names are recorded for the start-up line and the
// check that every listed name was routed.
struct Routed : torch::nn::Module {
  Routed() {
    a = register_module("a", torch::nn::Linear(4, 4));
    b = register_module("b", torch::nn::Linear(4, 4));
    head = register_module("head", torch::nn::Linear(4, 2));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = call_block(*this, "a", x, [this](const at::Tensor& in) { return a->forward(in).relu(); });
    h = call_block(*this, "b", h, [this](const at::Tensor& in) { return b->forward(in).relu(); });
    return call_submodule(*this, "head", h, [this](const at::Tensor& in) { return head->forward(in); });
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, head{nullptr};
};

std::vector<at::Tensor> gradients(Routed& model) {
  at::manual_seed(3);
  model.zero_grad();
  model.forward(at::randn({5, 4})).pow(2).sum().backward();
  std::vector<at::Tensor> grads;
  for (const auto& p : model.parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST(ActivationCheckpointingChoice, AllRecomputesTheBlocksAndAListTheNamedSubmodules) {
  at::manual_seed(0);
  auto model = std::make_shared<Routed>();
  const std::vector<at::Tensor> plain = gradients(*model);

  set_activation_checkpointing(*model, {true, {}});
  const std::vector<at::Tensor> all = gradients(*model);
  EXPECT_EQ(checkpointed_submodules(*model), (std::vector<std::string>{"a", "b"}));

  set_activation_checkpointing(*model, {false, {"head", "missing"}});
  const std::vector<at::Tensor> listed = gradients(*model);
  EXPECT_EQ(checkpointed_submodules(*model), std::vector<std::string>{"head"});
  EXPECT_EQ(unrouted_checkpointed_submodules(*model), std::vector<std::string>{"missing"});

  set_activation_checkpointing(*model, {});
  EXPECT_TRUE(checkpointed_submodules(*model).empty());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(at::equal(plain[i], all[i])) << i;
    EXPECT_TRUE(at::equal(plain[i], listed[i])) << i;
  }
}

// fp32_modules and checkpointing together: a listed name recomputes in float32, as it first ran.
TEST(ActivationCheckpointingChoice, AnFp32ModuleIsRecomputedInFloat32) {
  const auto run = [](bool recompute) {
    at::manual_seed(0);
    auto model = std::make_shared<Routed>();
    set_fp32_modules(*model, {"b"});
    set_activation_checkpointing(*model, {recompute, {}});
    at::manual_seed(3);
    {
      AutocastScope scope(at::kCPU, at::kBFloat16);
      const at::Tensor y = model->forward(at::randn({5, 4}));
      EXPECT_EQ(y.scalar_type(), at::kBFloat16);
      y.to(at::kFloat).pow(2).sum().backward();
    }
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    set_activation_checkpointing(*model, {});
    set_fp32_modules(*model, {});
    return grads;
  };
  const auto plain = run(false), recomputed = run(true);
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(plain[i], recomputed[i])) << i;
}

}  // namespace
}  // namespace mixt
