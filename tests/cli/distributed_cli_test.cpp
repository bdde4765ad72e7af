// End to end, data parallel: the real `mixt run` as two ranks of a Gloo process group on
// loopback (started here with torchrun's environment variables, or by torchrun itself),
// on real (small) Fashion-MNIST data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "child_process.h"
#include "data_support.h"
#include "experiment/experiment.h"
#include "plugins.h"
#include "ranks.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::only_run_directory;

using testing::ChildProcess;
using testing::max_difference;
using testing::rank_environment;
using testing::RankResult;
using testing::run_ranks;

const std::string kInfPlugin = testing::configured::fixture_plugin_dir() + "/libmixt_fixture_inf_injection.so";

// 4 optimizer steps of a global batch of 64 (BATCH per rank), then an evaluation.
const std::string kRecipe = R"(name: dp
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 64, limit: 512 }
  val:   { name: fashion_mnist, split: test, batch_size: 128, limit: 256 }
trainer: { epochs: 1, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 4,
           distributed: { backend: gloo, timeout: 30 } }
output: runs
)";

// The model's parameters and buffers as a checkpoint holds them, loaded by the trainer itself.
std::map<std::string, at::Tensor> checkpoint_weights(const fs::path& recipe, const fs::path& checkpoint) {
  Registry registry;
  PluginLoader loader(registry);
  Experiment e = prepare_experiment(recipe, {}, loader, registry, [](const std::string&) {});
  Progress progress(false, 1000, /*quiet=*/true);
  Trainer trainer(e.components, e.facts, e.options, nullptr, progress);
  trainer.resume(checkpoint);
  std::map<std::string, at::Tensor> weights;
  for (const auto& item : e.components.model->named_parameters()) weights[item.key()] = item.value().detach().clone();
  for (const auto& item : e.components.model->named_buffers()) {
    weights[item.key()] = item.value().detach().to(at::kDouble).clone();  // num_batches_tracked is an integer
  }
  return weights;
}

std::string line_with(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

// A character-level gpt2 under causal_lm, run as kRecipe's model: 4 steps of a global batch
// of 16 shuffled windows of the GPL-3 text.
const std::string kLanguageModelRecipe = R"(name: dp
task:      { name: causal_lm }
model:     { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 32, context_length: 32, dropout: 0, attention_dropout: 0 }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 3.0e-3 }
data:
  train: { name: text, context: 32, to: 0.5, batch_size: 16 }
  val:   { name: text, context: 32, from: 0.95, batch_size: 32 }
trainer: { epochs: 1, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 4,
           distributed: { backend: gloo, timeout: 30 } }
output: runs
)";

// Two ranks with batch B/2 each against one process with batch B: the same global batch
// (DistributedSampler sharding of the same seeded permutation), hence the same weights
// within float tolerance. A third run with batch B per rank (global 2B) must differ: the
// comparison can fail. `summary`: how the run's last line starts.
void expect_two_ranks_match_one_process(const std::string& precision, double tolerance,
                                        const std::string& base = kRecipe, std::int64_t batch = 64,
                                        const std::string& summary = "test accuracy") {
  TempDir dir;
  const fs::path recipe = dir.write("r.yaml", testing::replace_once(base, "{ name: fp32 }", precision));
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto dual = run_ranks(dir, 2, {{"output=dual", "data.train.batch_size=" + std::to_string(batch / 2)}});
  ASSERT_EQ(dual[0].exit_code, 0) << dual[0].log << "\n---\n" << dual[1].log;
  ASSERT_EQ(dual[1].exit_code, 0) << dual[1].log;
  const auto control = run_ranks(dir, 2, {{"output=control"}});
  ASSERT_EQ(control[0].exit_code, 0) << control[0].log;

  EXPECT_THAT(dual[0].log, HasSubstr("data parallel: 2 ranks, gloo backend, cpu"));
  EXPECT_THAT(dual[1].log, Not(HasSubstr("run directory"))) << "rank 1 must stay quiet\n" << dual[1].log;
  EXPECT_FALSE(fs::exists(dir.path() / "dual" / "dp" / "rank1")) << "only rank 0 writes";

  const auto ckpt = [&](const char* output) {
    return only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001";
  };
  const auto w_single = checkpoint_weights(recipe, ckpt("single"));
  const auto w_dual = checkpoint_weights(recipe, ckpt("dual"));
  const auto w_control = checkpoint_weights(recipe, ckpt("control"));
  const double difference = max_difference(w_single, w_dual);
  const double control_difference = max_difference(w_single, w_control);
  std::printf("%s: max |w(1 process) - w(2 ranks)| = %.3g; with twice the global batch: %.3g\n", precision.c_str(),
              difference, control_difference);
  EXPECT_LT(difference, tolerance);
  // The control differs by orders of magnitude more than the tolerance allows.
  EXPECT_GT(control_difference, 10 * tolerance);

  // The evaluation is reduced over the ranks' shards: the same samples, the same numbers.
  EXPECT_NE(line_with(single.output, summary), "") << single.output;
  EXPECT_EQ(line_with(single.output, summary).substr(0, 22), line_with(dual[0].log, summary).substr(0, 22))
      << single.output << "\n---\n"
      << dual[0].log;
}

TEST(DataParallel, TwoRanksMatchOneProcessWithTheSameGlobalBatchFp32) {
  expect_two_ranks_match_one_process("{ name: fp32 }", 1e-5);
}

// The same for a language model: token windows sharded over the ranks, next-token losses
// averaged over them ("validation: loss 4.1234, perplexity ...").
TEST(DataParallel, TwoRanksTrainAGpt2AsOneProcessWithTheSameGlobalBatch) {
  expect_two_ranks_match_one_process("{ name: fp32 }", 1e-5, kLanguageModelRecipe, 16, "validation: loss");
}

// The all-reduce started from gradient hooks during backward (overlap: true) and started
// after backward (the default) give bitwise the same weights; with gradient accumulation (two
// micro-batches of 16 per rank: only the last backward starts all-reduces) too, and that
// still matches one process with batch 64.
TEST(DataParallel, OverlapAndAccumulationGiveTheSameWeights) {
  TempDir dir;
  const fs::path recipe = dir.write("r.yaml", kRecipe);
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto overlapped =
      run_ranks(dir, 2, {{"output=overlap", "data.train.batch_size=32", "trainer.distributed.overlap=true"}});
  ASSERT_EQ(overlapped[0].exit_code, 0) << overlapped[0].log;
  const auto after =
      run_ranks(dir, 2, {{"output=after", "data.train.batch_size=32", "trainer.distributed.overlap=false"}});
  ASSERT_EQ(after[0].exit_code, 0) << after[0].log;
  const auto accumulated = run_ranks(
      dir, 2,
      {{"output=accumulate", "data.train.batch_size=16", "trainer.accumulate=2", "trainer.distributed.overlap=true"}});
  ASSERT_EQ(accumulated[0].exit_code, 0) << accumulated[0].log;

  const auto weights = [&](const char* output) {
    return checkpoint_weights(recipe, only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001");
  };
  const auto w_single = weights("single");
  EXPECT_EQ(max_difference(weights("overlap"), weights("after")), 0.0);
  const double accumulate_difference = max_difference(w_single, weights("accumulate"));
  std::printf("max |w(1 process) - w(2 ranks x 2 micro-batches)| = %.3g\n", accumulate_difference);
  EXPECT_LT(accumulate_difference, 1e-5);
}

TEST(DataParallel, TwoRanksMatchOneProcessWithTheSameGlobalBatchAmpFp16) {
  // amp_fp16 is always built: its absence is a failure here, not a reason to skip.
  testing::BuiltPlugins plugins;
  ASSERT_TRUE(plugins.registry.find(ComponentKind::precision, "amp_fp16"));
  // float16 forward passes round differently with batch 32 than with 64: measured 1.4e-5.
  expect_two_ranks_match_one_process("{ name: amp_fp16 }", 2e-4);
}

// A validation set that does not divide by the ranks (255 images on 2): DistributedSampler's
// padding gives each rank 128, and the one repeated image must not be counted. mixt evaluate
// on two ranks then gives one process's figures: the same sample count and accuracies, the
// loss up to the order of the sums.
TEST(DataParallel, EvaluateOnTwoRanksScoresEverySampleOnceAsOneProcessDoes) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const std::vector<std::string> evaluate = {"evaluate", "r.yaml", "--json", "data.val.limit=255",
                                             "data.val.batch_size=100"};
  const CommandResult one = run_mixt(evaluate, dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto single = nlohmann::json::parse(one.output.substr(one.output.find('{')));
  ASSERT_EQ(single["samples"], 255);

  const auto ranks = run_ranks(dir, 2, {{}}, 120, evaluate);
  for (const RankResult& rank : ranks) ASSERT_EQ(rank.exit_code, 0) << rank.log;
  const auto two = nlohmann::json::parse(ranks[0].log.substr(ranks[0].log.find('{')));
  EXPECT_EQ(two["samples"], 255);
  EXPECT_EQ(two["top1"], single["top1"]);
  EXPECT_EQ(two["top5"], single["top5"]);
  EXPECT_NEAR(two["loss"].get<double>(), single["loss"].get<double>(), 1e-6 * single["loss"].get<double>());
  EXPECT_EQ(two["confusion"], single["confusion"]);
  EXPECT_THAT(ranks[1].log, Not(HasSubstr("\"samples\"")));  // rank 0 reports
}

std::string inf_recipe(const std::string& options) {
  return "plugins: [" + kInfPlugin + "]\n" +
         testing::replace_once(kRecipe, "{ name: fp32 }", "{ name: fixture_inf_injection, " + options + " }");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The inf appears on rank 1 only, after the gradients were averaged: only the all-reduce
// (max) of the found-inf flag through PrecisionContext::communicator makes rank 0 skip too.
TEST(DataParallel, AnInfOnOneRankMakesEveryRankSkipThatStep) {
  TempDir dir;
  dir.write("r.yaml", inf_recipe("inject_rank: 1, inject_step: 2, inject_at: step, sync_found_inf: true"));
  const auto ranks = run_ranks(dir, 2, {{}});
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].log << "\n---\n" << ranks[1].log;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].log;
  EXPECT_THAT(ranks[0].log, HasSubstr("rank 0 skipped step 2"));
  EXPECT_THAT(ranks[1].log, HasSubstr("rank 1 skipped step 2"));
  EXPECT_EQ(count(ranks[0].log + ranks[1].log, "skipped step"), 2u) << ranks[0].log << ranks[1].log;
  // Rank 0's metrics: one skipped step, logged from step 2 on.
  const std::string metrics = testing::read_file(only_run_directory(dir.path() / "runs" / "dp") / "metrics.jsonl");
  EXPECT_THAT(metrics, HasSubstr("\"skipped_steps\":1.0"));
}

// Injected before the average (in the policy's backward(), after autograd's), the inf
// reaches every rank through the all-reduce sum even without the explicit flag all-reduce.
// (Not with overlap: true, where gradients are sent from hooks during autograd's backward,
// as in DDP: see docs/distributed.md.)
TEST(DataParallel, AnInfBeforeTheAverageReachesEveryRank) {
  TempDir dir;
  dir.write("r.yaml", inf_recipe("inject_rank: 0, inject_step: 3, inject_at: backward, sync_found_inf: false"));
  const auto ranks = run_ranks(dir, 2, {{}});
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].log << "\n---\n" << ranks[1].log;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].log;
  EXPECT_THAT(ranks[0].log, HasSubstr("rank 0 skipped step 3"));
  EXPECT_THAT(ranks[1].log, HasSubstr("rank 1 skipped step 3"));
}

// Without that all-reduce, rank 1 skips alone and the ranks' weights part: the trainer's
// end-of-epoch consistency check says so instead of training on silently.
TEST(DataParallel, RanksThatTakeDifferentStepsAreCaught) {
  TempDir dir;
  dir.write("r.yaml", inf_recipe("inject_rank: 1, inject_step: 2, inject_at: step, sync_found_inf: false"));
  const auto ranks = run_ranks(dir, 2, {{}});
  ASSERT_TRUE(ranks[0].exit_code && ranks[1].exit_code) << "hung";
  EXPECT_EQ(*ranks[0].exit_code, 1) << ranks[0].log;
  EXPECT_EQ(*ranks[1].exit_code, 1) << ranks[1].log;
  EXPECT_THAT(ranks[0].log, HasSubstr("mixt: error: the model's parameters differ across ranks after epoch 1"))
      << ranks[0].log;
  EXPECT_EQ(count(ranks[0].log + ranks[1].log, "skipped step"), 1u);
}

// The ema callback on two ranks: each keeps the same average (checked when it is swapped in
// for its evaluation), which rank 0 reports and checkpoints. A callback whose weights differ
// by rank is caught at that check.
TEST(DataParallel, EveryRankKeepsTheSameEmaAndRankLocalWeightsAreCaught) {
  TempDir dir;
  dir.write("r.yaml", kRecipe + "callbacks: [{name: ema, decay: 0.5}]\n");
  const auto ranks = run_ranks(dir, 2, {{}});
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].log << "\n---\n" << ranks[1].log;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].log;
  const fs::path run = only_run_directory(dir.path() / "runs" / "dp");
  const std::string metrics = testing::read_file(run / "metrics.jsonl");
  EXPECT_THAT(metrics, HasSubstr("\"val_top1_ema\""));
  std::size_t event_files = 0;  // the tensorboard callback writes from rank 0 only
  for (const auto& entry : fs::directory_iterator(run)) {
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  EXPECT_EQ(event_files, 1u);

  TempDir other;
  other.write("r.yaml", "plugins: [" + testing::configured::fixture_plugin_dir() +
                            "/libmixt_fixture_rank_weights.so]\n" + kRecipe + "callbacks: [fixture_rank_weights]\n");
  const auto parted = run_ranks(other, 2, {{}});
  ASSERT_TRUE(parted[0].exit_code && parted[1].exit_code) << "hung";
  EXPECT_EQ(*parted[0].exit_code, 1) << parted[0].log;
  EXPECT_EQ(*parted[1].exit_code, 1) << parted[1].log;
  EXPECT_THAT(parted[0].log, HasSubstr("mixt: error: the model's parameters differ across ranks with the rank weights in for "
                               "their evaluation after epoch 1"))
      << parted[0].log;
}

TEST(DataParallel, MismatchedRecipesAreDetectedAtStart) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const auto ranks = run_ranks(dir, 2, {{}, {"optimizer.lr=0.1"}});
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ranks[r].exit_code) << "rank " << r << " hung";
    EXPECT_EQ(*ranks[r].exit_code, 2) << ranks[r].log;
    EXPECT_NE(ranks[r].log.find("mixt: error: the resolved recipe differs across ranks (hash on rank " +
                                std::to_string(r)),
              std::string::npos)
        << ranks[r].log;
  }
  // Rank 1 also says where its recipe differs from rank 0's, not only a hash.
  EXPECT_THAT(ranks[1].log, HasSubstr("of the resolved recipe is '  lr: 0.1' here, '  lr: 0.05' on rank 0"))
      << ranks[1].log;
}

// sync_batchnorm on a model with batch norm: two ranks of batch 32 normalise with the
// statistics of the global batch of 64, so weights and running statistics match one process
// with batch 64. The control, the same two ranks without sync_batchnorm (each rank normalises
// with its own 32 samples, as DDP without SyncBatchNorm), must not.
TEST(DataParallel, SyncBatchnormTwoRanksMatchOneProcess) {
  TempDir dir;
  const fs::path recipe =
      dir.write("r.yaml", testing::replace_once(kRecipe, "hidden: 32 }", "hidden: 32, batch_norm: true }"));
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto synced =
      run_ranks(dir, 2, {{"output=synced", "data.train.batch_size=32", "trainer.distributed.sync_batchnorm=true"}});
  ASSERT_EQ(synced[0].exit_code, 0) << synced[0].log << "\n---\n" << synced[1].log;
  ASSERT_EQ(synced[1].exit_code, 0) << synced[1].log;
  const auto local = run_ranks(dir, 2, {{"output=local", "data.train.batch_size=32"}});
  ASSERT_EQ(local[0].exit_code, 0) << local[0].log;

  const auto weights = [&](const char* output) {
    return checkpoint_weights(recipe, only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001");
  };
  const auto w_single = weights("single");
  ASSERT_EQ(w_single.count("features.1.running_var"), 1u) << "the batch-norm buffers are compared too";
  const double difference = max_difference(w_single, weights("synced"));
  const double control_difference = max_difference(w_single, weights("local"));
  std::printf("sync_batchnorm: max |w(1 process) - w(2 ranks)| = %.3g; without sync_batchnorm: %.3g\n", difference,
              control_difference);
  // The first convolution's gradient is what batch norm leaves after removing the batch's
  // mean and scale: a small difference of large terms, so float32 rounding grows over the
  // steps. Measured: 3.0e-5 here; one process with 2 threads instead of 1 differs from
  // itself by 2.9e-5 in the same tensor. Without sync_batchnorm: 9.4e-3.
  EXPECT_LT(difference, 1e-4);
  EXPECT_GT(control_difference, 10 * 1e-4);
  EXPECT_EQ(line_with(single.output, "test accuracy").substr(0, 22),
            line_with(synced[0].log, "test accuracy").substr(0, 22))
      << single.output << "\n---\n"
      << synced[0].log;
}

// Activation checkpointing under data parallelism: with the gradient all-reduces started
// from hooks during backward (overlap) and batch-norm statistics taken over both ranks (whose
// all-reduce the recomputed forward runs again), two ranks that recompute every block end
// bit for bit where two ranks that keep their activations do; rank 0 says so at start-up.
TEST(DataParallel, ActivationCheckpointingKeepsTheWeightsOfOverlapAndSyncBatchnormExact) {
  TempDir dir;
  const fs::path recipe =
      dir.write("r.yaml", testing::replace_once(kRecipe, "hidden: 32 }", "hidden: 32, batch_norm: true }"));
  const std::vector<std::string> common = {"data.train.batch_size=32", "trainer.distributed.overlap=true",
                                           "trainer.distributed.sync_batchnorm=true"};
  const auto with = [&](const char* output, const char* setting) {
    std::vector<std::string> overrides = common;
    overrides.push_back(std::string("output=") + output);
    overrides.push_back(std::string("trainer.activation_checkpointing=") + setting);
    return overrides;
  };
  const auto kept = run_ranks(dir, 2, {with("kept", "none")});
  ASSERT_EQ(kept[0].exit_code, 0) << kept[0].log << "\n---\n" << kept[1].log;
  const auto recomputed = run_ranks(dir, 2, {with("recomputed", "all")});
  ASSERT_EQ(recomputed[0].exit_code, 0) << recomputed[0].log << "\n---\n" << recomputed[1].log;
  ASSERT_EQ(recomputed[1].exit_code, 0) << recomputed[1].log;
  EXPECT_THAT(recomputed[0].log, ::testing::HasSubstr("activation checkpointing: 1 submodule recomputed in the "
                                                      "backward pass (features)"));
  EXPECT_THAT(kept[0].log, ::testing::Not(::testing::HasSubstr("activation checkpointing:")));

  const auto weights = [&](const char* output) {
    return checkpoint_weights(recipe, only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001");
  };
  const auto w_kept = weights("kept");
  ASSERT_EQ(w_kept.count("features.1.running_var"), 1u) << "the batch-norm buffers are compared too";
  EXPECT_EQ(max_difference(w_kept, weights("recomputed")), 0.0);
}

TEST(DataParallel, SyncBatchnormOnAModelWithoutBatchNormWarnsAndBadBackendsFail) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const auto result = testing::run_mixt({"check", "r.yaml", "trainer.distributed.sync_batchnorm=true"}, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("sync_batchnorm"));
  EXPECT_THAT(result.output, HasSubstr("the model has no batch-norm layers: sync_batchnorm has nothing to synchronise"))
      << result.output;
  const auto backend = testing::run_mixt({"check", "r.yaml", "trainer.distributed.backend=mpi"}, dir.path());
  EXPECT_EQ(backend.exit_code, 2) << backend.output;
  EXPECT_THAT(backend.output, HasSubstr("unknown backend 'mpi'"));
  // nccl with trainer.device: cpu is wrong on every machine: `mixt check` said ok, and a
  // launch named the key twice without a location.
  const auto nccl = testing::run_mixt(
      {"check", "r.yaml", "trainer.distributed.backend=nccl", "trainer.device=cpu"}, dir.path());
  EXPECT_EQ(nccl.exit_code, 2) << nccl.output;
  EXPECT_THAT(nccl.output, HasSubstr("command line 'trainer.distributed.backend=nccl': trainer.distributed.backend: nccl "
                             "needs a CUDA device, but trainer.device is cpu"))
      << nccl.output;
  // Seconds and MiB become int64 milliseconds and bytes: 1e300 overflowed into a negative
  // timeout that failed at once.
  for (const std::string bad : {"trainer.distributed.timeout=1e300", "trainer.distributed.bucket_mb=1e300"}) {
    const auto huge = testing::run_mixt({"check", "r.yaml", bad}, dir.path());
    EXPECT_EQ(huge.exit_code, 2) << huge.output;
    EXPECT_THAT(huge.output, HasSubstr("must be a number of"));
  }
}

// Rank 1 alone (rank 0 never started): it gives up after the timeout with one clear
// message, not c10d's retry logs and backtraces.
TEST(DataParallel, ARankWhoseStoreNeverAppearsFailsClearlyAfterTheTimeout) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kRecipe, "timeout: 30", "timeout: 3"));
  const auto start = std::chrono::steady_clock::now();
  ChildProcess rank1({testing::configured::mixt_executable(), "run", "r.yaml"},
                     rank_environment(1, 2, testing::free_port()), dir.path(), dir.path() / "1.log");
  const auto code = rank1.wait_for(60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = testing::read_file(dir.path() / "1.log");
  ASSERT_TRUE(code) << log;
  EXPECT_EQ(*code, 1) << log;
  EXPECT_THAT(log, HasSubstr("mixt: error: rank 1 could not reach the c10d store at 127.0.0.1:"));
  EXPECT_THAT(log, Not(HasSubstr("Exception raised from")));
  EXPECT_LT(seconds, 30.0);
}

TEST(DataParallel, KillingOneRankMakesTheOtherExitWithinTheTimeout) {
  TempDir dir;
  // Long enough never to finish on its own; a 15 s collective timeout.
  std::string recipe = testing::replace_once(kRecipe, "epochs: 1", "epochs: 1000");
  recipe = testing::replace_once(recipe, "timeout: 30", "timeout: 15");
  dir.write("r.yaml", recipe);
  const int port = testing::free_port();
  ChildProcess rank0({testing::configured::mixt_executable(), "run", "r.yaml"}, rank_environment(0, 2, port),
                     dir.path(), dir.path() / "0.log");
  ChildProcess rank1({testing::configured::mixt_executable(), "run", "r.yaml"}, rank_environment(1, 2, port),
                     dir.path(), dir.path() / "1.log");
  ASSERT_TRUE(testing::rank0_logged(rank0, dir.path() / "0.log", " step 2/"));
  const testing::LostRankEnd end = testing::kill_rank_1(rank0, rank1, dir.path() / "0.log");
  ASSERT_TRUE(end.code) << "rank 0 still running 45 s after rank 1 was killed\n" << end.log;
  EXPECT_EQ(*end.code, 1) << end.log;
  EXPECT_THAT(end.log, HasSubstr("failed on rank 0 of 2 (gloo)"));
  EXPECT_THAT(end.log, Not(HasSubstr("terminate called")));
  EXPECT_LT(end.seconds, 15.0 + 10.0);
}

// Rank 1 dies in the middle of epoch 2's second step, after its gradients joined the
// all-reduce; rank 0 applies that step, then fails at the step's loss all-reduce. Rank 0's
// weights are the run's after that step: it saves them as `interrupted` (the run used to
// lose the epoch's steps), counting the step it applied (counted from the step's start,
// a resume would apply it twice), and two ranks resumed from it end where an
// uninterrupted run does.
TEST(DataParallel, ARankLostMidEpochCostsNoCompletedStep) {
  TempDir dir;
  std::string recipe = inf_recipe("sync_found_inf: false");
  recipe = testing::replace_once(recipe, "epochs: 1", "epochs: 2");
  const fs::path file = dir.write("r.yaml", recipe);
  const auto crashed = run_ranks(dir, 2, {{"output=crashed", "precision.crash_rank=1", "precision.crash_step=6"}});
  ASSERT_TRUE(crashed[0].exit_code && crashed[1].exit_code) << crashed[0].log;
  EXPECT_EQ(*crashed[0].exit_code, 1) << crashed[0].log;
  EXPECT_EQ(*crashed[1].exit_code, 17) << crashed[1].log;
  EXPECT_THAT(crashed[0].log, HasSubstr("the 2 completed steps of epoch 2 are saved in"));
  const fs::path run = only_run_directory(dir.path() / "crashed" / "dp");
  ASSERT_TRUE(fs::exists(run / "checkpoints" / "interrupted")) << crashed[0].log;

  const auto resumed = run_ranks(dir, 2, {{"output=crashed", "trainer.resume=" + run.string()}});
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].log;
  EXPECT_THAT(resumed[0].log, HasSubstr("at epoch 2, step 6"));
  const auto straight = run_ranks(dir, 2, {{"output=straight"}});
  ASSERT_EQ(straight[0].exit_code, 0) << straight[0].log;

  const auto last = [](const fs::path& output) {
    std::vector<fs::path> runs;
    for (const auto& entry : fs::directory_iterator(output / "dp")) runs.push_back(entry.path());
    std::sort(runs.begin(), runs.end());
    return runs.back() / "checkpoints" / "epoch-0002";
  };
  const double difference = max_difference(checkpoint_weights(file, last(dir.path() / "straight")),
                                           checkpoint_weights(file, last(dir.path() / "crashed")));
  EXPECT_EQ(difference, 0.0);
}

// A diverging run (an absurd learning rate): the loss, averaged over the ranks every step,
// turns NaN on every rank at once, so every rank stops after the same step with the same
// message and exit 1, and nothing is checkpointed.
TEST(DataParallel, ANonFiniteLossStopsEveryRankAfterTheSameStep) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const auto ranks = run_ranks(dir, 2, {{"optimizer.lr=1e12"}});
  const std::string error = "mixt: error: the training loss became inf or NaN at step ";
  for (const auto& rank : ranks) {
    ASSERT_EQ(rank.exit_code, 1) << ranks[0].log << "\n---\n" << ranks[1].log;
    EXPECT_THAT(rank.log, Not(HasSubstr("terminate called")));
  }
  const std::string stopped = line_with(ranks[0].log, error);
  ASSERT_NE(stopped, "") << ranks[0].log;
  EXPECT_EQ(stopped.substr(0, stopped.find(')')), line_with(ranks[1].log, error).substr(0, stopped.find(')')))
      << ranks[0].log << "\n---\n" << ranks[1].log;
  EXPECT_FALSE(fs::exists(only_run_directory(dir.path() / "runs" / "dp") / "checkpoints" / "epoch-0001"));
}

// SIGINT to one rank only: the stop request is agreed on with the step's loss, so both
// ranks stop after the same step; rank 0 writes the interrupted checkpoint; both exit 130.
TEST(DataParallel, AnInterruptOnOneRankStopsEveryRankAfterTheSameStep) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kRecipe, "epochs: 1", "epochs: 1000"));
  const int port = testing::free_port();
  ChildProcess rank0({testing::configured::mixt_executable(), "run", "r.yaml"}, rank_environment(0, 2, port),
                     dir.path(), dir.path() / "0.log");
  ChildProcess rank1({testing::configured::mixt_executable(), "run", "r.yaml"}, rank_environment(1, 2, port),
                     dir.path(), dir.path() / "1.log");
  ASSERT_TRUE(testing::rank0_logged(rank0, dir.path() / "0.log", " step 2/"));
  rank1.signal(SIGINT);
  const auto code0 = rank0.wait_for(60), code1 = rank1.wait_for(10);
  const std::string log0 = testing::read_file(dir.path() / "0.log"), log1 = testing::read_file(dir.path() / "1.log");
  ASSERT_TRUE(code0 && code1) << log0 << "\n---\n" << log1;
  EXPECT_EQ(*code0, 130) << log0;
  EXPECT_EQ(*code1, 130) << log1;
  // Epochs here are 4 steps: the signal may land mid-epoch (checkpoints/interrupted) or in
  // an evaluation or checkpoint, where every rank stops at the epoch's checkpoint.
  const fs::path checkpoints = only_run_directory(dir.path() / "runs" / "dp") / "checkpoints";
  if (log0.find("interrupted: checkpoint written to") != std::string::npos) {
    EXPECT_TRUE(fs::exists(checkpoints / "interrupted"));
  } else {
    const std::string stopped = line_with(log0, " after epoch ");
    ASSERT_NE(stopped, "") << log0;
    const std::string file = stopped.substr(stopped.find("its checkpoint is ") + 18);
    EXPECT_TRUE(fs::exists(dir.path() / file.substr(0, file.find(' ')))) << stopped;
  }
}

// A run on a LoaderDataset (cifar10: loader positions are what a resume restarts from)
// interrupted mid-epoch on cue: the checkpoint records where each rank's loader stood, and
// both ranks resumed from it end with the uninterrupted run's weights, bit for bit.
TEST(DataParallel, ALoaderDatasetRunInterruptedMidEpochResumesWhereEachRankStood) {
  TempDir dir;
  const fs::path cifar = dir.path() / "cifar";
  testing::run_fixture_script("make_cifar10.py", testing::shell_quote(cifar.string()));  // 100 training images
  std::string recipe = inf_recipe("interrupt_rank: 1, interrupt_step: 3");
  recipe = testing::replace_once(recipe, "{ name: fashion_mnist, split: train, batch_size: 64, limit: 512 }",
                                 "{ name: cifar10, root: " + cifar.string() + ", batch_size: 5, workers: 1 }");
  recipe = testing::replace_once(recipe, "{ name: fashion_mnist, split: test, batch_size: 128, limit: 256 }",
                                 "{ name: cifar10, root: " + cifar.string() + ", split: test, batch_size: 20 }");
  recipe = testing::replace_once(recipe, " max_steps_per_epoch: 4,", "");  // the whole epoch: 10 steps
  const fs::path recipe_file = dir.write("r.yaml", recipe);

  const auto straight = run_ranks(dir, 2, {{"precision.interrupt_step=0", "output=straight"}});
  for (const auto& rank : straight) ASSERT_EQ(rank.exit_code, 0) << rank.log;

  const auto interrupted = run_ranks(dir, 2, {{"output=interrupted"}});
  for (const auto& rank : interrupted) ASSERT_EQ(rank.exit_code, 130) << rank.log;
  const fs::path checkpoint = only_run_directory(dir.path() / "interrupted" / "dp") / "checkpoints" / "interrupted";
  const nlohmann::json header = read_checkpoint(checkpoint).header;
  const std::int64_t trained = header.at("batches_in_epoch").get<std::int64_t>();
  EXPECT_GT(trained, 0);
  EXPECT_LT(trained, 10);
  EXPECT_EQ(header.value("data_positions", nlohmann::json()), nlohmann::json({trained, trained})) << header.dump();

  const auto resumed = run_ranks(dir, 2, {{"trainer.resume=" + checkpoint.string(), "precision.interrupt_step=0",
                                           "output=resumed"}});
  for (const auto& rank : resumed) ASSERT_EQ(rank.exit_code, 0) << rank.log;
  EXPECT_THAT(resumed[0].log, HasSubstr("resumed from"));
  const auto last = [&](const char* output) {
    return only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001";
  };
  EXPECT_EQ(max_difference(checkpoint_weights(recipe_file, last("straight")),
                           checkpoint_weights(recipe_file, last("resumed"))),
            0.0);
}

// torchrun itself (the wheel's), with one restart allowed: rank 1 crashes in epoch 2 of
// the first attempt; the restarted job resumes from the epoch-1 checkpoint of the same run
// directory and finishes.
TEST(DataParallel, TorchrunRestartResumesFromTheLastCheckpoint) {
  if (std::system("command -v torchrun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "torchrun is not on PATH (it comes with the torch wheel: scripts/setup)";
  }
  TempDir dir;
  std::string recipe = inf_recipe("crash_rank: 1, crash_step: 6");
  recipe = testing::replace_once(recipe, "epochs: 1", "epochs: 2");
  dir.write("r.yaml", recipe);
  const int port = testing::free_port();
  ChildProcess torchrun({"torchrun", "--no-python", "--nproc-per-node=2", "--max-restarts=1", "--master-addr=127.0.0.1",
                         "--master-port=" + std::to_string(port), "--rdzv-id=restart-test",
                         testing::configured::mixt_executable(), "run", "r.yaml"},
                        {"OMP_NUM_THREADS=1"}, dir.path(), dir.path() / "torchrun.log");
  const auto code = torchrun.wait_for(240);
  const std::string log = testing::read_file(dir.path() / "torchrun.log");
  ASSERT_TRUE(code) << "torchrun still running\n" << log;
  EXPECT_EQ(*code, 0) << log;
  EXPECT_THAT(log, HasSubstr("rank 1 crashes at step 6"));
  EXPECT_THAT(log, HasSubstr("resumed from"));
  const fs::path link = dir.path() / "runs" / "dp" / "elastic-restart-test";
  ASSERT_TRUE(fs::is_symlink(link)) << log;
  const fs::path run = dir.path() / "runs" / "dp" / fs::read_symlink(link);
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "epoch-0002")) << log;
  // One run directory, its metrics continued by the restarted attempt.
  EXPECT_EQ(only_run_directory(dir.path() / "runs" / "dp"), run);
  const std::string metrics = testing::read_file(run / "metrics.jsonl");
  EXPECT_EQ(count(metrics, "\"event\":\"epoch\""), 2u) << metrics;
}

// Two jobs with the same --rdzv-id (torchrun's default is `none` for every job): the one
// started later replaces runs/<name>/elastic-<id>. A restarted attempt of the first job must
// still resume its own run: the run directory is kept in the elastic agent's store, which
// lives as long as the job. (It used to follow the link into the other job's run.)
TEST(DataParallel, ARestartedJobResumesItsOwnRunWhenAnotherJobTookItsLink) {
  if (std::system("command -v torchrun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "torchrun is not on PATH (it comes with the torch wheel: scripts/setup)";
  }
  TempDir dir;
  std::string recipe = inf_recipe("crash_rank: 1, crash_step: 14");  // epoch 4, step 2
  recipe = testing::replace_once(recipe, "epochs: 1", "epochs: 4");
  dir.write("r.yaml", recipe);
  // The other job's run: a checkpoint of the same recipe.
  const testing::CommandResult other =
      testing::run_mixt({"run", "r.yaml", "trainer.epochs=1", "precision.crash_rank=-1"}, dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const fs::path other_run = only_run_directory(dir.path() / "runs" / "dp");
  const std::string other_metrics = testing::read_file(other_run / "metrics.jsonl");

  const int port = testing::free_port();
  ChildProcess torchrun({"torchrun", "--no-python", "--nproc-per-node=2", "--max-restarts=1", "--master-addr=127.0.0.1",
                         "--master-port=" + std::to_string(port), "--rdzv-id=shared-id",
                         testing::configured::mixt_executable(), "run", "r.yaml"},
                        {"OMP_NUM_THREADS=1"}, dir.path(), dir.path() / "torchrun.log");
  const fs::path link = dir.path() / "runs" / "dp" / "elastic-shared-id";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::is_symlink(link) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(fs::is_symlink(link)) << testing::read_file(dir.path() / "torchrun.log");
  const fs::path own_run = dir.path() / "runs" / "dp" / fs::read_symlink(link);
  // What the later job does: point the link at its run.
  fs::remove(link);
  fs::create_symlink(other_run.filename(), link);
  ASSERT_THAT(testing::read_file(dir.path() / "torchrun.log"), Not(HasSubstr("crashes at step")))
      << "the crash came before the link was taken: nothing was tested";

  const auto code = torchrun.wait_for(240);
  const std::string log = testing::read_file(dir.path() / "torchrun.log");
  ASSERT_TRUE(code) << "torchrun still running\n" << log;
  EXPECT_EQ(*code, 0) << log;
  EXPECT_THAT(log, HasSubstr("rank 1 crashes at step 14"));
  EXPECT_THAT(log, HasSubstr("resumed from " + fs::canonical(own_run).string()));
  EXPECT_TRUE(fs::exists(own_run / "checkpoints" / "epoch-0004")) << log;
  EXPECT_EQ(count(testing::read_file(own_run / "metrics.jsonl"), "\"event\":\"epoch\""), 4u);
  EXPECT_EQ(testing::read_file(other_run / "metrics.jsonl"), other_metrics) << "the other job's run was written to";
}

}  // namespace
}  // namespace mixt
