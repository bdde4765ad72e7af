// mixt::BatchNorm with a communicator (mixt/helpers/batch_norm.h). Ranks are threads of this process
// sharing an in-memory all-reduce; the reference is one torch::nn::BatchNorm — ATen's own
// batch_norm kernel, which mixt's sync path does not use — on the whole (concatenated) batch.
// Each rank's loss is Σ y·g over its samples, so the sum of the ranks' losses is the
// reference's loss: input gradients must match row for row, and the ranks' weight and bias
// gradients must add up to the reference's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>

#include "distributed/sync_batchnorm.h"
#include "mixt/error.h"
#include "mixt/helpers/batch_norm.h"
#include "recipe/recipe_loader.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

// An all-reduce between threads: the last arrival publishes the result and wakes the others.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world) {}
  int world() const { return world_; }
  int collectives() const { return collectives_; }

  void all_reduce(at::Tensor& tensor, ReduceOp op) {
    std::unique_lock<std::mutex> lock(mutex_);
    const long round = round_;
    if (arrived_ == 0) {
      accumulator_ = tensor.clone();
    } else if (op == ReduceOp::max) {
      accumulator_ = at::maximum(accumulator_, tensor);
    } else {
      accumulator_ = accumulator_ + tensor;
    }
    if (++arrived_ == world_) {
      result_ = op == ReduceOp::avg ? accumulator_ / world_ : accumulator_;
      arrived_ = 0;
      ++round_;
      ++collectives_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    tensor.copy_(result_);
  }

 private:
  const int world_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long round_ = 0;
  int collectives_ = 0;
  at::Tensor accumulator_, result_;
};

class ThreadRank : public Communicator {
 public:
  ThreadRank(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.world(); }
  void all_reduce(at::Tensor& tensor, ReduceOp op) const override { group_.all_reduce(tensor, op); }
  void broadcast(at::Tensor&, int) const override { throw std::logic_error("sync batch norm never broadcasts"); }
  void barrier() const override { throw std::logic_error("sync batch norm never waits at a barrier"); }

 private:
  ThreadGroup& group_;
  int rank_;
};

// Runs `body(rank)` on `world` threads at once and rethrows the first failure.
void on_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

struct StepResult {
  at::Tensor output, input_grad, weight_grad, bias_grad, running_mean, running_var;
  std::int64_t batches_tracked = 0;
};

template <class Layer>
StepResult step(Layer& layer, const at::Tensor& input, const at::Tensor& upstream, int steps = 1) {
  StepResult r;
  for (int s = 0; s < steps; ++s) {
    at::Tensor x = input.detach().clone(at::MemoryFormat::Preserve).requires_grad_();
    layer->zero_grad();
    r.output = layer->forward(x);
    (r.output.to(at::kFloat) * upstream).sum().backward();
    r.input_grad = x.grad();
  }
  r.weight_grad = layer->weight.grad();
  r.bias_grad = layer->bias.grad();
  r.running_mean = layer->running_mean.clone();
  r.running_var = layer->running_var.clone();
  r.batches_tracked = layer->num_batches_tracked.template item<std::int64_t>();
  return r;
}

double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a.to(at::kDouble) - b.to(at::kDouble)).abs().max() / b.to(at::kDouble).abs().max().clamp_min(1e-12))
      .item<double>();
}

// One torch::nn::BatchNorm<D> on the whole batch against `counts.size()` synchronised ranks
// holding counts[r] consecutive samples each.
template <class Reference, class Synchronised, class Options>
void expect_ranks_match_one_process(const std::vector<std::int64_t>& counts, std::vector<std::int64_t> sample_shape,
                                    Options options, int steps = 1, bool channels_last = false) {
  at::manual_seed(7);
  std::int64_t total = 0;
  for (auto n : counts) total += n;
  sample_shape.insert(sample_shape.begin(), total);
  const std::int64_t channels = sample_shape[1];
  // A mean far from zero and unequal scales per channel: the variance must not cancel.
  at::Tensor input = at::randn(sample_shape) * 3.0 + 5.0;
  if (channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor upstream = at::randn(sample_shape);
  const at::Tensor weight = at::rand({channels}) + 0.5;
  const at::Tensor bias = at::randn({channels});

  Reference reference(options);
  {
    at::NoGradGuard no_grad;
    reference->weight.copy_(weight);
    reference->bias.copy_(bias);
  }
  const StepResult expected = step(reference, input, upstream, steps);

  const int world = static_cast<int>(counts.size());
  ThreadGroup group(world);
  std::vector<StepResult> ranks(counts.size());
  on_ranks(world, [&](int r) {
    std::int64_t start = 0;
    for (int i = 0; i < r; ++i) start += counts[static_cast<std::size_t>(i)];
    ThreadRank communicator(group, r);
    Synchronised layer(options);
    {
      at::NoGradGuard no_grad;
      layer->weight.copy_(weight);
      layer->bias.copy_(bias);
    }
    layer->synchronise_over(&communicator);
    const auto n = counts[static_cast<std::size_t>(r)];
    ranks[static_cast<std::size_t>(r)] =
        step(layer, input.narrow(0, start, n), upstream.narrow(0, start, n), steps);
  });

  std::vector<at::Tensor> outputs, input_grads;
  at::Tensor weight_grad = at::zeros_like(weight), bias_grad = at::zeros_like(bias);
  for (const StepResult& r : ranks) {
    outputs.push_back(r.output);
    input_grads.push_back(r.input_grad);
    weight_grad += r.weight_grad;
    bias_grad += r.bias_grad;
    EXPECT_LT(relative_difference(r.running_mean, expected.running_mean), 1e-6);
    EXPECT_LT(relative_difference(r.running_var, expected.running_var), 1e-6);
    EXPECT_EQ(r.batches_tracked, expected.batches_tracked);
    if (channels_last && r.output.numel() > 0) {
      EXPECT_TRUE(r.output.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  // Measured: 0 to 3e-7 (float32 rounding of differently ordered sums).
  EXPECT_LT(relative_difference(at::cat(outputs), expected.output), 1e-6);
  EXPECT_LT(relative_difference(at::cat(input_grads), expected.input_grad), 1e-6);
  EXPECT_LT(relative_difference(weight_grad, expected.weight_grad), 2e-6);
  EXPECT_LT(relative_difference(bias_grad, expected.bias_grad), 1e-6);
  // One all-reduce per forward and one per backward.
  EXPECT_EQ(group.collectives(), 2 * steps);
}

TEST(SyncBatchNorm, TwoRanksMatchOneProcessOnTheWholeBatch) {
  expect_ranks_match_one_process<torch::nn::BatchNorm2d, BatchNorm2d>({6, 6}, {3, 5, 4},
                                                                      torch::nn::BatchNormOptions(3));
}

TEST(SyncBatchNorm, UnequalAndEmptyShardsAreWeightedByTheirCounts) {
  expect_ranks_match_one_process<torch::nn::BatchNorm2d, BatchNorm2d>({3, 9}, {4, 3, 3},
                                                                      torch::nn::BatchNormOptions(4));
  expect_ranks_match_one_process<torch::nn::BatchNorm2d, BatchNorm2d>({5, 0, 2}, {2, 4, 4},
                                                                      torch::nn::BatchNormOptions(2));
}

TEST(SyncBatchNorm, ChannelsLastStaysChannelsLast) {
  expect_ranks_match_one_process<torch::nn::BatchNorm2d, BatchNorm2d>({4, 4}, {8, 3, 5},
                                                                      torch::nn::BatchNormOptions(8), 1, true);
}

// BatchNorm1d on (N, C) and (N, C, L); momentum unset (a cumulative average) over 3 steps.
TEST(SyncBatchNorm, OneDimensionalAndCumulativeAverage) {
  expect_ranks_match_one_process<torch::nn::BatchNorm1d, BatchNorm1d>({5, 7}, {6}, torch::nn::BatchNormOptions(6));
  expect_ranks_match_one_process<torch::nn::BatchNorm1d, BatchNorm1d>(
      {4, 4}, {3, 10}, torch::nn::BatchNormOptions(3).momentum(std::nullopt), 3);
  expect_ranks_match_one_process<torch::nn::BatchNorm3d, BatchNorm3d>({2, 3}, {2, 3, 3, 3},
                                                                      torch::nn::BatchNormOptions(2).eps(1e-3));
}

// float16/bfloat16 activations (what autocast produces): the output keeps the input's dtype,
// the statistics are float32's.
TEST(SyncBatchNorm, ReducedPrecisionInputsKeepTheirDtype) {
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    at::manual_seed(3);
    const at::Tensor input = (at::randn({8, 4, 3, 3}) * 2 + 1).to(dtype);
    BatchNorm2d reference(4);
    const at::Tensor expected = reference->forward(input.to(at::kFloat));
    ThreadGroup group(2);
    std::vector<at::Tensor> outputs(2);
    on_ranks(2, [&](int r) {
      ThreadRank communicator(group, r);
      BatchNorm2d layer(4);
      layer->synchronise_over(&communicator);
      outputs[static_cast<std::size_t>(r)] = layer->forward(input.narrow(0, 4 * r, 4));
    });
    const at::Tensor output = at::cat(outputs);
    EXPECT_EQ(output.scalar_type(), dtype);
    EXPECT_LT(relative_difference(output, expected), dtype == at::kHalf ? 2e-3 : 1e-2) << dtype;
  }
}

// Evaluation, a single rank, or no communicator: the plain torch::nn forward, no collective.
TEST(SyncBatchNorm, EvaluationAndOneRankTakeNoCollective) {
  at::manual_seed(1);
  const at::Tensor input = at::randn({4, 3, 2, 2}) + 1;
  ThreadGroup lonely(1);
  ThreadRank only(lonely, 0);
  BatchNorm2d single(3);
  single->synchronise_over(&only);
  torch::nn::BatchNorm2d plain(3);
  EXPECT_TRUE(at::equal(single->forward(input), plain->forward(input)));
  EXPECT_TRUE(at::equal(single->running_var, plain->running_var));
  EXPECT_EQ(lonely.collectives(), 0);

  ThreadGroup pair(2);
  ThreadRank first(pair, 0);
  BatchNorm2d evaluating(3);
  evaluating->synchronise_over(&first);
  evaluating->eval();
  torch::nn::BatchNorm2d fresh(3);
  fresh->eval();
  EXPECT_TRUE(at::equal(evaluating->forward(input), fresh->forward(input)));  // returns: no all-reduce waited on
  EXPECT_EQ(pair.collectives(), 0);
}

// clone() keeps the mixt class (torch's Cloneable copies as torch::nn::BatchNorm2d, which
// cannot synchronise), deep-copies parameters and buffers, keeps the training flag and the
// communicator; so a Sequential holding one clones too (its AnyModule casts each clone back
// to the class it holds).
TEST(SyncBatchNorm, CloneKeepsTheClassTheTensorsAndTheCommunicator) {
  ThreadGroup group(2);
  ThreadRank communicator(group, 0);
  at::manual_seed(2);
  BatchNorm2d layer(3);
  {
    at::NoGradGuard no_grad;
    layer->weight.uniform_();
    layer->running_mean.normal_();
  }
  layer->synchronise_over(&communicator);
  layer->eval();
  const auto cloned = std::dynamic_pointer_cast<BatchNorm2dImpl>(layer->clone());
  ASSERT_NE(cloned, nullptr) << "cloned as " << layer->clone()->name();
  EXPECT_EQ(cloned->communicator(), &communicator);
  EXPECT_FALSE(cloned->is_training());
  EXPECT_TRUE(cloned->weight.requires_grad());
  for (const auto& [name, original, copy] :
       {std::tuple{"weight", layer->weight, cloned->weight}, std::tuple{"running_mean", layer->running_mean,
                                                                         cloned->running_mean}}) {
    EXPECT_TRUE(at::equal(copy, original)) << name;
    EXPECT_NE(copy.data_ptr(), original.data_ptr()) << name << " is shared, not copied";
  }
  // The registered parameters are the members forward() uses.
  EXPECT_EQ(cloned->named_parameters()["weight"].data_ptr(), cloned->weight.data_ptr());
  EXPECT_EQ(cloned->named_buffers()["running_var"].data_ptr(), cloned->running_var.data_ptr());

  torch::nn::Sequential model(torch::nn::Conv2d(1, 2, 3), BatchNorm2d(2));
  const auto copy = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  ASSERT_NE(copy, nullptr);
  ASSERT_NE((*copy)[1]->as<BatchNorm2dImpl>(), nullptr);
  const at::Tensor input = at::randn({2, 1, 5, 5});
  EXPECT_TRUE(at::equal(copy->forward(input), model->forward(input)));
}

Config distributed_section() {
  static RecipeNodePtr root = parse_yaml("trainer:\n  distributed:\n    sync_batchnorm: true\n", "r.yaml");
  return Config(root, "").section("trainer").section("distributed");
}

TEST(SyncBatchNorm, TheFrameworkAttachesToMixtLayersAndNamesTorchOnes) {
  ThreadGroup group(2);
  ThreadRank communicator(group, 0);
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& text) { warnings.push_back(text); };

  torch::nn::Sequential mixed(torch::nn::Conv2d(1, 2, 3), BatchNorm2d(2), torch::nn::BatchNorm2d(2));
  try {
    synchronise_batch_norm(*mixed, &communicator, distributed_section(), warn);
    ADD_FAILURE() << "a torch::nn::BatchNorm2d cannot synchronise";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::recipe);
    EXPECT_EQ(e.where().str().rfind("r.yaml:3:", 0), 0u) << e.where().str();
    const std::string text = e.message();
    EXPECT_THAT(text, HasSubstr("batch-norm layers 2 are torch::nn batch norm"));
  }

  torch::nn::Sequential ours(torch::nn::Conv2d(1, 2, 3), BatchNorm2d(2), torch::nn::Conv2d(2, 2, 3), BatchNorm2d(2));
  EXPECT_EQ(synchronise_batch_norm(*ours, &communicator, distributed_section(), warn), 2u);
  EXPECT_EQ(ours[1]->as<BatchNorm2dImpl>()->communicator(), &communicator);
  EXPECT_EQ(ours[3]->as<BatchNorm2dImpl>()->communicator(), &communicator);
  EXPECT_TRUE(warnings.empty());

  torch::nn::Sequential none(torch::nn::Conv2d(1, 2, 3));
  EXPECT_EQ(synchronise_batch_norm(*none, &communicator, distributed_section(), warn), 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("no batch-norm layers"));
}

}  // namespace
}  // namespace mixt
