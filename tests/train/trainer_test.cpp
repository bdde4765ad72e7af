// The trainer on a tiny in-memory problem: it learns, it is deterministic given the seed,
// and a run interrupted mid-epoch and resumed from its checkpoint ends bitwise identical
// to an uninterrupted run.
#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <caffe2/serialize/inline_container.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "mixt/helpers/data_loader.h"

#include "blob_training.h"
#include "checkpoint/checkpoint.h"
#include "operator_calls.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "recipe/recipe_node.h"
#include "expect_error.h"
#include "test_support.h"
#include "common/interrupt.h"
#include "train/out_of_memory.h"

namespace mixt {
namespace {

using testing::BlobDataset;
using testing::BlobEvents;
using testing::BlobSource;
using testing::Fixture;
using testing::InterruptibleLoaderDataset;
using testing::TinyMlp;
using testing::options;
using testing::same;

TEST(Trainer, LearnsASeparableProblem) {
  Fixture f;
  Trainer trainer(f.components, f.facts, options(3), nullptr, f.progress);
  const SingleProcess single_process;
  const Evaluation before = Evaluator(f.components, f.facts, single_process).evaluate(*f.components.val);
  const TrainResult result = trainer.fit();
  ASSERT_TRUE(result.final_eval.has_value());
  EXPECT_EQ(result.optimizer_steps, 48);
  EXPECT_EQ(result.samples, 3 * 256);
  EXPECT_LT(result.final_eval->loss, before.loss / 4);
  EXPECT_GT(result.final_eval->figure("top1"), 0.95);
  // samples/s is over the training loops: the evaluations are in the total only.
  EXPECT_GT(result.train_seconds, 0.0);
  EXPECT_LT(result.train_seconds, result.elapsed_seconds);
}

// A dataset that says it has batches and delivers none (a plugin breaking the contract of
// mixt/dataset.h): the epoch trained nothing, which used to end "done". The same for a
// validation set that delivers no sample: its NaN score would read as a result.
class DeliversNothing : public BlobDataset {
 public:
  DeliversNothing() : BlobDataset(5) {}
  std::optional<Batch> next_batch() override { return std::nullopt; }
};

TEST(Trainer, DataThatDeliversNothingIsARuntimeError) {
  Fixture train_empty;
  train_empty.components.train = std::make_unique<DeliversNothing>();
  try {
    Trainer(train_empty.components, train_empty.facts, options(1), nullptr, train_empty.progress).fit();
    ADD_FAILURE() << "an epoch without a batch ended done";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_EQ(e.message(), "data.train delivered no batch in epoch 1 although it has 16 batches per epoch");
  }
  Fixture val_empty;
  val_empty.components.val = std::make_unique<DeliversNothing>();
  try {
    Trainer(val_empty.components, val_empty.facts, options(1), nullptr, val_empty.progress).fit();
    ADD_FAILURE() << "a validation without a sample ended done";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_THAT(e.message(), HasSubstr("data.val gave no usable sample after epoch 1"));
  }
}

TEST(Trainer, SameSeedSameWeights) {
  Fixture a, b;
  Trainer(a.components, a.facts, options(2), nullptr, a.progress).fit();
  Trainer(b.components, b.facts, options(2), nullptr, b.progress).fit();
  EXPECT_TRUE(same(a.weights(), b.weights()));
}

TEST(Trainer, GradientAccumulationStepsOncePerGroup) {
  Fixture f;
  TrainerOptions o = options(1);
  o.accumulate = 4;
  EXPECT_EQ(Trainer(f.components, f.facts, o, nullptr, f.progress).fit().optimizer_steps, 4);
}

TEST(Trainer, InterruptedMidEpochAndResumedEqualsUninterrupted) {
  testing::TempDir dir;
  Fixture straight;
  Trainer(straight.components, straight.facts, options(2), nullptr, straight.progress).fit();

  clear_interrupt_request();
  Fixture first({.interrupt_at = 21});  // stops inside the second epoch, after batch 22 of 32
  RunDirectory run(dir.path(), "interrupted");
  SCOPED_TRACE(::testing::Message() << "expected the interrupt");
  const Error e =
      testing::thrown_error([&] { Trainer(first.components, first.facts, options(2), &run, first.progress).fit(); });
  EXPECT_EQ(e.exit_code(), 130);
  clear_interrupt_request();
  const auto checkpoint = run.checkpoints() / "interrupted";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  EXPECT_TRUE(std::filesystem::exists(run.checkpoints() / "epoch-0001"));

  Fixture resumed;  // fresh weights and optimizer, overwritten by the checkpoint
  Trainer trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress);
  trainer.resume(checkpoint);
  trainer.fit();
  EXPECT_TRUE(same(straight.weights(), resumed.weights()));
}

// A mid-epoch position counts batches of the order the run had. Resumed with another seed
// (another order) or accumulation (another count of batches per step), the rest of the
// epoch skipped samples it never trained on and repeated others, silently. An epoch's
// checkpoint starts the next epoch afresh, so there the change is the user's to make.
TEST(Trainer, ResumingMidEpochWithAnotherDataOrderIsARecipeError) {
  testing::TempDir dir;
  clear_interrupt_request();
  Fixture first({.interrupt_at = 21});
  RunDirectory run(dir.path(), "interrupted");
  EXPECT_THROW(Trainer(first.components, first.facts, options(2), &run, first.progress).fit(), Error);
  clear_interrupt_request();
  for (const auto& [change, expected] : std::vector<std::pair<std::string, std::string>>{
           {"seed", "seed 0, accumulate 1; this run has 256 samples in 16 batches per rank, 1 rank, seed 9, "
                    "accumulate 1"},
           {"accumulate", "seed 0, accumulate 2"},
           {"shuffle", "seed 0, accumulate 1, shuffle=false"}}) {
    Fixture resumed;
    TrainerOptions o = options(2);
    if (change == "seed") o.seed = 9;
    if (change == "accumulate") o.accumulate = 2;
    if (change == "shuffle") resumed.facts.data_order = "shuffle=false";
    Trainer trainer(resumed.components, resumed.facts, o, nullptr, resumed.progress);
    try {
      trainer.resume(run.checkpoints() / "interrupted");
      ADD_FAILURE() << change << ": resumed mid-epoch with another data order";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_THAT(e.message(), HasSubstr("checkpoint stopped in the middle of epoch 2 (after batch 6)"))
          << e.message();
      EXPECT_THAT(e.message(), HasSubstr(expected));
    }
    Fixture at_epoch_end;
    at_epoch_end.facts.data_order = resumed.facts.data_order;
    Trainer(at_epoch_end.components, at_epoch_end.facts, o, nullptr, at_epoch_end.progress)
        .resume(run.checkpoints() / "epoch-0001");
  }
}

// Ctrl-C during an evaluation: the epoch's checkpoint is already written, so the run stops
// there. It used to finish the evaluation and train one more step for a checkpoint
// (`interrupted`, one step into the next epoch): minutes of waiting on ImageNet.
TEST(Trainer, AnInterruptDuringTheEvaluationStopsAtTheEpochsCheckpoint) {
  testing::TempDir dir;
  clear_interrupt_request();
  Fixture first;
  first.components.val = std::make_unique<BlobDataset>(5, BlobEvents{.interrupt_at = 2});
  RunDirectory run(dir.path(), "evaluation");
  SCOPED_TRACE(::testing::Message() << "expected the interrupt");
  const Error e =
      testing::thrown_error([&] { Trainer(first.components, first.facts, options(3), &run, first.progress).fit(); });
  EXPECT_EQ(e.exit_code(), 130);
  clear_interrupt_request();
  EXPECT_TRUE(std::filesystem::exists(run.checkpoints() / "epoch-0001"));
  EXPECT_FALSE(std::filesystem::exists(run.checkpoints() / "interrupted"));
  EXPECT_THAT(testing::read_file(run.path() / "metrics.jsonl"), Not(HasSubstr("val_loss")));

  Fixture straight;
  Trainer(straight.components, straight.facts, options(3), nullptr, straight.progress).fit();
  Fixture resumed;
  Trainer trainer(resumed.components, resumed.facts, options(3), nullptr, resumed.progress);
  trainer.resume(run.path());
  trainer.fit();
  EXPECT_TRUE(same(straight.weights(), resumed.weights()));
}

// The same on a LoaderDataset, which resumes at the saved loader position: the resumed run
// loads only the samples of the batches it has not trained on (the old way replayed and
// decoded the whole epoch's start) and still ends bitwise where the straight run does.
// A runtime failure mid-epoch keeps the epoch's completed steps: they are saved as
// `interrupted`, and the run resumed from it ends where an uninterrupted one does.
TEST(Trainer, AFailureMidEpochSavesTheCompletedStepsAndResumingThemEqualsUninterrupted) {
  testing::TempDir dir;
  Fixture straight;
  Trainer(straight.components, straight.facts, options(2), nullptr, straight.progress).fit();

  Fixture failing({.fail_at = 21});  // batch 6 of epoch 2
  RunDirectory run(dir.path(), "failed");
  SCOPED_TRACE(::testing::Message() << "expected the failure");
  const Error e = testing::thrown_error(
      [&] { Trainer(failing.components, failing.facts, options(2), &run, failing.progress).fit(); });
  EXPECT_EQ(e.kind(), ErrorKind::runtime);
  EXPECT_THAT(e.message(), HasSubstr("bad sample blob-7"));
  const std::string saved = "fix or remove the file\n  the 5 completed steps of epoch 2 are saved in " +
                            (run.checkpoints() / "interrupted").string() +
                            ": once fixed, continue with trainer.resume=" + run.path().string();
  EXPECT_THAT(e.hint(), HasSubstr(saved));
  const auto checkpoint = run.checkpoints() / "interrupted";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));

  Fixture resumed;
  Trainer trainer(resumed.components, resumed.facts, options(2), nullptr, resumed.progress);
  trainer.resume(checkpoint);
  trainer.fit();
  EXPECT_TRUE(same(resumed.weights(), straight.weights()));

  // A failure before any step of an epoch (its first batch, or starting it) leaves the
  // previous epoch's checkpoint as the newest.
  for (const auto& [fail_at, fail_starting_epoch] : {std::pair<std::int64_t, std::int64_t>{16, -1}, {-1, 1}}) {
    testing::TempDir other;
    Fixture early({.fail_at = fail_at, .fail_starting_epoch = fail_starting_epoch});
    RunDirectory early_run(other.path(), "failed");
    EXPECT_THROW(Trainer(early.components, early.facts, options(2), &early_run, early.progress).fit(), Error);
    EXPECT_FALSE(std::filesystem::exists(early_run.checkpoints() / "interrupted"))
        << fail_at << " " << fail_starting_epoch;
    EXPECT_TRUE(std::filesystem::exists(early_run.checkpoints() / "epoch-0001"));
  }

  // An evaluation that fails (a bad validation file) comes after the epoch's checkpoint.
  testing::TempDir third;
  Fixture evaluated;
  evaluated.components.val = std::make_unique<BlobDataset>(5, BlobEvents{.fail_at = 0});
  RunDirectory evaluated_run(third.path(), "failed");
  EXPECT_THROW(Trainer(evaluated.components, evaluated.facts, options(2), &evaluated_run, evaluated.progress).fit(),
               Error);
  EXPECT_TRUE(std::filesystem::exists(evaluated_run.checkpoints() / "epoch-0001"));
}

TEST(Trainer, ResumingMidEpochOnALoaderDatasetLoadsOnlyTheRest) {
  auto loader_fixture = [](std::int64_t interrupt_at, std::shared_ptr<BlobSource> source,
                           std::int64_t batch_size = 16) {
    auto f = std::make_unique<Fixture>();
    LoaderOptions o;
    o.batch_size = batch_size;
    o.workers = 0;  // loads happen in next_batch(): the interrupt lands on a known batch
    o.seed = 5;
    f->components.train = std::make_unique<InterruptibleLoaderDataset>(source, o, interrupt_at);
    return f;
  };
  testing::TempDir dir;
  auto straight = loader_fixture(-1, std::make_shared<BlobSource>());
  Trainer(straight->components, straight->facts, options(2), nullptr, straight->progress).fit();

  clear_interrupt_request();
  auto first = loader_fixture(21, std::make_shared<BlobSource>());  // stops after batch 6 of epoch 2
  RunDirectory run(dir.path(), "interrupted");
  EXPECT_THROW(Trainer(first->components, first->facts, options(2), &run, first->progress).fit(), Error);
  clear_interrupt_request();

  auto source = std::make_shared<BlobSource>();
  auto resumed = loader_fixture(-1, source);
  Trainer trainer(resumed->components, resumed->facts, options(2), nullptr, resumed->progress);
  trainer.resume(run.checkpoints() / "interrupted");
  trainer.fit();
  EXPECT_EQ(source->loads, (16 - 6) * 16);
  EXPECT_TRUE(same(straight->weights(), resumed->weights()));

  // The same checkpoint on data of 4 batches per epoch: a recipe error, not an empty epoch.
  auto bigger_batches = loader_fixture(-1, std::make_shared<BlobSource>(), 64);
  Trainer mismatched(bigger_batches->components, bigger_batches->facts, options(2), nullptr, bigger_batches->progress);
  try {
    mismatched.resume(run.checkpoints() / "interrupted");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::recipe);
    EXPECT_THAT(e.what(), HasSubstr("checkpoint stopped after batch 6 of epoch 2, but the training data has 4 "
                                         "batches per epoch"))
        << e.what();
  }
}

bool all_finite(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (!at::isfinite(t).all().item<bool>()) return false;
  }
  return true;
}

// A NaN sample in batch 5 of epoch 2 (step 21) makes that step's loss NaN and, applied, the
// weights NaN. The run stops with an error naming the step, before the epoch's checkpoint:
// with one checkpoint kept, writing it would have deleted the last good one.
TEST(Trainer, ANonFiniteLossStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  testing::TempDir dir;
  Fixture f({.nan_at = 20});
  RunDirectory run(dir.path(), "diverged");
  TrainerOptions o = options(3);  // log_every 1000: only the epoch's end looks at the loss
  o.keep_checkpoints = 1;
  SCOPED_TRACE(::testing::Message() << "expected the run to stop");
  const Error e = testing::thrown_error([&] { Trainer(f.components, f.facts, o, &run, f.progress).fit(); });
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_THAT(e.message(), HasSubstr("the training loss became inf or NaN at step 21 (epoch 2)"))
      << e.message();
  EXPECT_THAT(e.message(), HasSubstr("the newest checkpoint (" + (run.checkpoints() / "last").string() + ")"))
      << e.message();
  EXPECT_THAT(e.hint(), HasSubstr("trainer.stop_on_nonfinite_loss=false"));
  EXPECT_FALSE(all_finite(f.weights())) << "the fixture must really corrupt the weights";
  EXPECT_TRUE(std::filesystem::exists(run.checkpoints() / "epoch-0001"));
  EXPECT_FALSE(std::filesystem::exists(run.checkpoints() / "epoch-0002"));
  EXPECT_EQ(std::filesystem::read_symlink(run.checkpoints() / "last"), "epoch-0001");

  Fixture restored;
  Trainer trainer(restored.components, restored.facts, options(3), nullptr, restored.progress);
  trainer.resume(run.checkpoints() / "last");
  EXPECT_TRUE(all_finite(restored.weights()));
}

TEST(Trainer, WithStopOnNonFiniteLossOffTheRunTrainsOn) {
  Fixture f({.nan_at = 20});
  TrainerOptions o = options(2);
  o.stop_on_nonfinite_loss = false;
  EXPECT_EQ(Trainer(f.components, f.facts, o, nullptr, f.progress).fit().optimizer_steps, 32);
  EXPECT_FALSE(all_finite(f.weights()));
}

// A policy that skips a step with inf/NaN gradients, as a loss scaler does: the NaN loss of
// a skipped step harmed nothing, and the run goes on.
class SkipNonFiniteSteps : public PrecisionPolicy {
 public:
  StepOutcome step(Optimizer& optimizer) override {
    for (const auto& p : optimizer.parameters()) {
      if (p.grad().defined() && !at::isfinite(p.grad()).all().item<bool>()) return false;
    }
    optimizer.step();
    return true;
  }
};

TEST(Trainer, ANonFiniteLossOnAStepThePolicySkippedDoesNotStopTheRun) {
  Fixture f({.nan_at = 20});
  f.components.precision = std::make_unique<SkipNonFiniteSteps>();
  const TrainResult result = Trainer(f.components, f.facts, options(2), nullptr, f.progress).fit();
  EXPECT_EQ(result.skipped_steps, 1);
  EXPECT_TRUE(all_finite(f.weights()));
}

// A policy that applies a step with non-finite gradients and reports it applied, as
// amp_fp16 did with a loss scale that had underflowed to 0 (inf * 0 = NaN after its finite
// check): here, the epoch's last step. Every applied step's loss is finite.
class BreakTheWeightsOnStep : public PrecisionPolicy {
 public:
  explicit BreakTheWeightsOnStep(std::int64_t step) : break_at_(step) {}
  StepOutcome step(Optimizer& optimizer) override {
    optimizer.step();
    if (++steps_ == break_at_) {
      at::NoGradGuard no_grad;
      optimizer.parameters().front().fill_(NAN);
    }
    return true;
  }

 private:
  std::int64_t break_at_, steps_ = 0;
};

// The loss watch sees only the losses of applied steps, all finite here: the epoch's
// checkpoint held NaN weights, and the run went on (the next epoch's loss then stopped
// it, with that checkpoint as "the newest, from before it").
TEST(Trainer, WeightsBrokenWithEveryLossFiniteAreNeverCheckpointed) {
  testing::TempDir dir;
  Fixture f;
  f.components.precision = std::make_unique<BreakTheWeightsOnStep>(16);  // epoch 1's last step
  RunDirectory run(dir.path(), "broken");
  SCOPED_TRACE(::testing::Message() << "expected the run to stop");
  const Error e = testing::thrown_error([&] { Trainer(f.components, f.facts, options(2), &run, f.progress).fit(); });
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_THAT(e.message(), HasSubstr("the weights hold inf or NaN after epoch 1 although every applied step's loss was "
                             "finite; training stopped and no checkpoint was written from them"))
      << e.message();
  EXPECT_FALSE(std::filesystem::exists(run.checkpoints() / "epoch-0001"));
}

// How many times a one-epoch run of `steps` steps (no evaluation) read a tensor's value
// back to the host: .item() and friends all go through aten::_local_scalar_dense, a
// synchronisation on a GPU. `precision`: a policy to build instead of the plain one;
// `optimizer`: an optimizer section instead of the Fixture's (unfused) sgd.
std::int64_t host_reads_in_a_run_of(std::int64_t steps, const std::string& precision = "",
                                    const std::string& optimizer = "", double clip = 0,
                                    const std::string& grad_norm = "logged") {
  Fixture f;
  f.components.val.reset();
  if (!optimizer.empty()) {
    f.root = parse_yaml("optimizer: " + optimizer, "test");
    f.use_model(f.components.model);
  }
  if (!precision.empty()) {
    const RecipeNodePtr root = parse_yaml("precision: " + precision, "test");
    f.components.precision = f.plugins.registry.make_precision(Config(root, "").section("precision"), {});
  }
  TrainerOptions o = options(1);
  o.max_steps_per_epoch = steps;
  o.clip_grad_norm = clip;
  o.grad_norm = grad_norm;
  const std::vector<std::string> calls =
      testing::operators_called_during([&] { Trainer(f.components, f.facts, o, nullptr, f.progress).fit(); });
  return std::count(calls.begin(), calls.end(), "aten::_local_scalar_dense");
}

// The training step itself never waits for the device (docs/architecture.md): the host
// reads of a run do not grow with its number of steps; only logging, the epoch's end and
// evaluation read the loss (and the non-finite check rides along with them).
TEST(Trainer, AStepReadsNothingBackToTheHost) {
  const std::int64_t four = host_reads_in_a_run_of(4), sixteen = host_reads_in_a_run_of(16);
  EXPECT_EQ(sixteen, four) << "host reads: " << four << " in 4 steps, " << sixteen << " in 16";
  EXPECT_LE(four, 4) << "a handful per epoch: progress, log and epoch-end reads of the loss";
}

// Clipping and measuring the gradient norm on every step stay on the device too
// (LibTorch's C++ clip_grad_norm_ returns a double: a read per step).
TEST(Trainer, AClippedStepThatMeasuresItsNormReadsNothingBackToTheHost) {
  const std::int64_t four = host_reads_in_a_run_of(4, "", "", 1.0, "every_step");
  const std::int64_t sixteen = host_reads_in_a_run_of(16, "", "", 1.0, "every_step");
  EXPECT_EQ(sixteen, four) << "host reads: " << four << " in 4 steps, " << sixteen << " in 16";
}

// With an optimizer that cannot take the scale and flag (here sgd without fused: true),
// amp_fp16 reads one found-inf flag per step to decide between stepping and skipping, as
// PyTorch's GradScaler does (_maybe_opt_step); nothing else in the step may add to it.
TEST(Trainer, AnAmpFp16StepReadsOneFlagBackToTheHost) {
  const std::int64_t four = host_reads_in_a_run_of(4, "{name: amp_fp16}");
  const std::int64_t sixteen = host_reads_in_a_run_of(16, "{name: amp_fp16}");
  EXPECT_EQ(sixteen - four, 12) << "host reads: " << four << " in 4 steps, " << sixteen << " in 16";
}

// With a fused optimizer the scaler hands it the scale and flag (Optimizer::step_scaled) and
// the trainer counts skipped steps and watches the loss on the device: with no scheduler
// (which would ask whether each step was applied) nothing per step comes back to the host.
// (Fused AdamW's CPU kernel reads its step counters, CPU tensors, with .item(): no sync,
// but the count cannot tell, so SGD alone here; SyncFreeStep.* covers AdamW.)
TEST(Trainer, AnAmpFp16StepWithAFusedOptimizerReadsNothingBackToTheHost) {
  for (const char* optimizer : {"{name: sgd, lr: 0.05, momentum: 0.9, fused: true}",
                                "{name: sgd, lr: 0.05, momentum: 0.9, nesterov: true, fused: true}"}) {
    const std::int64_t four = host_reads_in_a_run_of(4, "{name: amp_fp16}", optimizer);
    const std::int64_t sixteen = host_reads_in_a_run_of(16, "{name: amp_fp16}", optimizer);
    EXPECT_EQ(sixteen, four) << optimizer << ": host reads: " << four << " in 4 steps, " << sixteen << " in 16";
    EXPECT_LE(four, 5) << optimizer << ": a handful per epoch, as without a scaler";
    // Unscaled, measured and clipped on every step: still nothing per step.
    const std::int64_t clipped_four = host_reads_in_a_run_of(4, "{name: amp_fp16}", optimizer, 1.0, "every_step");
    const std::int64_t clipped_sixteen = host_reads_in_a_run_of(16, "{name: amp_fp16}", optimizer, 1.0, "every_step");
    EXPECT_EQ(clipped_sixteen, clipped_four) << optimizer << ", clipped: host reads: " << clipped_four
                                             << " in 4 steps, " << clipped_sixteen << " in 16";
  }
}

// custom_scaler keeps its dynamic scale's bookkeeping on the host (one flag read per step);
// a static scale has none, so with a fused optimizer it decides on the device too.
TEST(Trainer, ACustomScalerStepReadsOneFlagUnlessItsScaleIsStaticAndTheOptimizerFused) {
  const std::string fused = "{name: sgd, lr: 0.05, momentum: 0.9, fused: true}";
  for (const char* policy : {"{name: custom_scaler, mode: static}", "{name: custom_scaler}"}) {
    const std::int64_t four = host_reads_in_a_run_of(4, policy, fused);
    const std::int64_t sixteen = host_reads_in_a_run_of(16, policy, fused);
    EXPECT_EQ(sixteen - four, std::string(policy).find("static") != std::string::npos ? 0 : 12)
        << policy << ": host reads: " << four << " in 4 steps, " << sixteen << " in 16";
  }
}

// A recipe whose model changed since the checkpoint (here a wider hidden layer) must not
// resume: LibTorch's Module::load would quietly replace every parameter by the saved one,
// shape and all, and train the old model under the new recipe.
// 17 samples in batches of 16: the epoch's last batch holds one sample.
class OneLeftOverDataset : public Dataset {
 public:
  std::int64_t size() const override { return 17; }
  std::int64_t num_classes() const override { return 4; }
  std::vector<std::int64_t> sample_shape() const override { return {8}; }
  std::int64_t batches_per_epoch() const override { return 2; }
  void start_epoch(std::int64_t) override { served_ = 0; }
  std::optional<Batch> next_batch() override {
    if (served_ >= 17) return std::nullopt;
    const std::int64_t n = served_ == 0 ? 16 : 1;
    served_ += n;
    return Batch{at::randn({n, 8}), at::zeros({n}, at::kLong)};
  }

 private:
  std::int64_t served_ = 0;
};

class BatchNormMlp : public Model {
 public:
  BatchNormMlp() {
    hidden_ = register_module("hidden", torch::nn::Linear(8, 16));
    norm_ = register_module("norm", torch::nn::BatchNorm1d(16));
    out_ = register_module("out", torch::nn::Linear(16, 4));
  }
  at::Tensor forward(const at::Tensor& x) override {
    return out_->forward(at::relu(norm_->forward(hidden_->forward(x))));
  }

 private:
  torch::nn::Linear hidden_{nullptr}, out_{nullptr};
  torch::nn::BatchNorm1d norm_{nullptr};
};

// The error one epoch of `f` ends with (a test failure when it ends without one).
Error error_of_one_epoch(Fixture& f) {
  try {
    Trainer(f.components, f.facts, options(1), nullptr, f.progress).fit();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error";
  return Error(ErrorKind::runtime, "no error");
}

TEST(Trainer, ABatchOfOneIntoBatchNormNamesTheStepAndSaysDropLast) {
  Fixture f;
  f.components.train = std::make_unique<OneLeftOverDataset>();
  f.components.val = nullptr;
  f.use_model(std::make_shared<BatchNormMlp>());
  const Error e = error_of_one_epoch(f);
  EXPECT_EQ(e.kind(), ErrorKind::runtime);
  EXPECT_THAT(e.message(), HasSubstr("epoch 1, step 2: training forward pass on a batch of shape [1, 8] failed: "
                             "Expected more than 1 value per channel when training"))
      << e.message();
  EXPECT_THAT(e.hint(), HasSubstr("set data.train.drop_last: true"));
}

// A model whose forward pass runs out of GPU memory (what the CUDA allocator throws).
class OutOfMemoryModel : public TinyMlp {
 public:
  at::Tensor forward(const at::Tensor&) override {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 20.00 GiB");
  }
};

TEST(Trainer, OutOfMemoryInTheForwardPassNamesTheStepAndWhatToChange) {
  Fixture f;
  f.use_model(std::make_shared<OutOfMemoryModel>());
  const Error e = error_of_one_epoch(f);
  EXPECT_EQ(e.kind(), ErrorKind::runtime);
  EXPECT_THAT(e.message(), HasSubstr("epoch 1, step 1: training forward pass on a batch of shape [16, 8] failed: CUDA out "
                             "of memory"))
      << e.message();
  EXPECT_EQ(e.hint(), kOutOfMemoryHint);
}

TEST(Trainer, ResumingIntoAModelOfAnotherShapeIsARecipeError) {
  testing::TempDir dir;
  Fixture saved;
  Trainer(saved.components, saved.facts, options(1), nullptr, saved.progress).save_checkpoint(dir.path() / "ckpt");

  Fixture wider;
  wider.components.model = std::make_shared<TinyMlp>(/*width=*/32);
  Trainer trainer(wider.components, wider.facts, options(2), nullptr, wider.progress);
  const Error e = testing::thrown_error([&] {
    trainer.resume(dir.path() / "ckpt");
  });
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.message(), HasSubstr("checkpoint does not fit this recipe's model"));
  EXPECT_THAT(e.message(), HasSubstr("shape mismatch (3): hidden.weight: file [16, 8] vs model [32, 8]"))
      << e.message();
  for (const auto& p : wider.components.model->named_parameters()) {
    EXPECT_EQ(p.value().size(0), p.key() == "out.weight" || p.key() == "out.bias" ? 4 : 32) << p.key();
  }
}

// The components are recorded in the checkpoint; a recipe with others is told which.
TEST(Trainer, ResumingWithOtherComponentsNamesBoth) {
  testing::TempDir dir;
  const ComponentRecord sgd{"optimizer", "sgd", "sgd", "1.2.0", "libsgd.so"};
  const ComponentRecord adamw{"optimizer", "adamw", "adamw", "1.2.0", "libadamw.so"};
  const ComponentRecord cosine{"scheduler", "cosine", "cosine", "1.0.0", "libcosine.so"};
  Fixture saved;
  saved.facts.records = {sgd};  // what build_components records
  Trainer(saved.components, saved.facts, options(1), nullptr, saved.progress).save_checkpoint(dir.path() / "ckpt");

  const std::pair<std::vector<ComponentRecord>, std::string> cases[] = {
      {{adamw}, "checkpoint was written by a run with optimizer 'sgd', this recipe has optimizer 'adamw'"},
      {{sgd, cosine}, "checkpoint was written by a run with no scheduler, this recipe has scheduler 'cosine'"},
  };
  for (const auto& [records, message] : cases) {
    Fixture other;
    other.facts.records = records;
    Trainer trainer(other.components, other.facts, options(2), nullptr, other.progress);
    try {
      trainer.resume(dir.path() / "ckpt");
      ADD_FAILURE() << "expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::recipe);
      EXPECT_EQ(e.message(), message);
    }
  }
  Fixture same_components;  // and the same ones resume
  same_components.facts.records = {sgd};
  Trainer(same_components.components, same_components.facts, options(2), nullptr, same_components.progress)
      .resume(dir.path() / "ckpt");

  // The other way round: a scheduler dropped on resume left the learning rate where the
  // schedule had it, constant, without a word.
  Fixture scheduled;
  scheduled.facts.records = {sgd, cosine};
  Trainer(scheduled.components, scheduled.facts, options(1), nullptr, scheduled.progress)
      .save_checkpoint(dir.path() / "cosine");
  Fixture unscheduled;
  unscheduled.facts.records = {sgd};
  try {
    Trainer(unscheduled.components, unscheduled.facts, options(2), nullptr, unscheduled.progress)
        .resume(dir.path() / "cosine");
    ADD_FAILURE() << "resumed a scheduled run without its scheduler";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "checkpoint was written by a run with scheduler 'cosine', this recipe has no scheduler");
  }
}

}  // namespace
}  // namespace mixt
