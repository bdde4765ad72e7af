// trainer.distributed.sharding end to end: `mixt run` as 2 and 4 Gloo ranks on loopback,
// each keeping 1/N of the optimizer state (`optimizer`, ZeRO-1), of the gradients too
// (`gradients`, ZeRO-2) or of the blocks' weights as well (`parameters`, ZeRO-3), against one process with the same
// global batch and against the replicated run; its checkpoints (a shard file a rank), resumes and refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "child_process.h"
#include "common/optimizer_shards.h"
#include "ranks.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::max_difference;
using testing::only_run_directory;
using testing::run_ranks;

// A character-level gpt2 under causal_lm with AdamW and clipping (the norm is taken over
// every rank's shards): 4 steps of a global batch of 16 windows of the GPL-3 text.
const std::string kGpt2Recipe = R"(name: dp
task:      { name: causal_lm }
model:     { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 32, context_length: 32, dropout: 0, attention_dropout: 0 }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 3.0e-3, weight_decay: 0.1 }
data:
  train: { name: text, context: 32, to: 0.5, batch_size: 16 }
  val:   { name: text, context: 32, from: 0.95, batch_size: 32 }
trainer: { epochs: 1, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 4, clip_grad_norm: 0.5,
           distributed: { backend: gloo, timeout: 30 } }
output: runs
)";

// resnet18 (batch norm: per-rank statistics, so it is compared with the replicated run, not
// one process) on synthetic images, SGD with momentum.
const std::string kResnetRecipe = R"(name: dp
model:     { name: resnet18, num_classes: 10 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4 }
data:
  train: { name: synthetic, shape: [3, 32, 32], num_classes: 10, size: 96, batch_size: 16 }
trainer: { epochs: 1, seed: 0, threads: 1, log_every: 1, max_steps_per_epoch: 3,
           distributed: { backend: gloo, timeout: 60 } }
output: runs
)";

// The checkpoint's weights (with `ema`, the ema callback's average), in float64.
std::map<std::string, at::Tensor> saved_weights(const fs::path& checkpoint, bool ema = false) {
  CheckpointContents contents = read_checkpoint(checkpoint);
  std::map<std::string, at::Tensor> weights;
  for (const auto& [name, tensor] : checkpoint_weights(contents, checkpoint, ema)) {
    weights[name] = tensor.to(at::kDouble);
  }
  return weights;
}

fs::path last_checkpoint(const TempDir& dir, const std::string& output) {
  return only_run_directory(dir.path() / output / "dp") / "checkpoints" / "epoch-0001";
}

fs::path checkpoint_of(const TempDir& dir, const std::string& output, const std::string& name) {
  return only_run_directory(dir.path() / output / "dp") / "checkpoints" / name;
}

void expect_all_exited(const std::vector<testing::RankResult>& ranks, int code = 0) {
  for (std::size_t r = 0; r < ranks.size(); ++r)
    ASSERT_EQ(ranks[r].exit_code, code) << "rank " << r << "\n" << ranks[r].log;
}

class ShardedGpt2 : public ::testing::TestWithParam<std::string> {};

// Each mode on 2 and 4 ranks trains as one process with the same global batch does, and as
// the replicated run on the same ranks (the norm for clipping is summed over the shards: its
// rounding only); a control with twice the global batch differs.
TEST_P(ShardedGpt2, TrainsAsOneProcessWithTheSameGlobalBatch) {
  const std::string mode = GetParam();
  TempDir dir;
  dir.write("r.yaml", kGpt2Recipe);
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string sharding = "trainer.distributed.sharding=" + mode;
  const auto two = run_ranks(dir, 2, {{"output=two", "data.train.batch_size=8", sharding}});
  expect_all_exited(two);
  const auto replicated = run_ranks(dir, 2, {{"output=replicated", "data.train.batch_size=8"}});
  expect_all_exited(replicated);
  const auto four = run_ranks(dir, 4, {{"output=four", "data.train.batch_size=4", sharding}}, 240);
  expect_all_exited(four);
  // Two micro-batches of 4 a step (reduced once, after the last), and every block
  // recomputed in the backward pass (its gradients still reach the reduction).
  const auto accumulated =
      run_ranks(dir, 2, {{"output=accumulated", "data.train.batch_size=4", "trainer.accumulate=2", sharding}});
  expect_all_exited(accumulated);
  const auto recomputed = run_ranks(
      dir, 2, {{"output=recomputed", "data.train.batch_size=8", "trainer.activation_checkpointing=all", sharding}});
  expect_all_exited(recomputed);
  // Buckets of 4 KiB: every tensor larger than one is reduced (or gathered) in pieces.
  const auto small_buckets = run_ranks(
      dir, 2, {{"output=small-buckets", "data.train.batch_size=8", "trainer.distributed.bucket_mb=0.004", sharding}});
  expect_all_exited(small_buckets);
  const auto control = run_ranks(dir, 2, {{"output=control", sharding}});
  expect_all_exited(control);
  EXPECT_THAT(two[0].log, HasSubstr("sharding: " + mode + " (each rank keeps 1/2 of the optimizer state"));

  const auto w_single = saved_weights(last_checkpoint(dir, "single"));
  const double two_ranks = max_difference(w_single, saved_weights(last_checkpoint(dir, "two")));
  const double four_ranks = max_difference(w_single, saved_weights(last_checkpoint(dir, "four")));
  const double replicated_two =
      max_difference(saved_weights(last_checkpoint(dir, "replicated")), saved_weights(last_checkpoint(dir, "two")));
  const double accumulated_difference = max_difference(w_single, saved_weights(last_checkpoint(dir, "accumulated")));
  const double recomputed_difference = max_difference(saved_weights(last_checkpoint(dir, "two")),
                                                      saved_weights(last_checkpoint(dir, "recomputed")));
  const double control_difference = max_difference(w_single, saved_weights(last_checkpoint(dir, "control")));
  std::printf(
      "sharding %s: max |w(1 process) - w| on 2 ranks %.3g, on 4 ranks %.3g; 2 ranks replicated vs sharded "
      "%.3g; control (twice the global batch) %.3g\n",
      mode.c_str(), two_ranks, four_ranks, replicated_two, control_difference);
  // One process sums each gradient over 16 windows, the ranks over 8 or 4 and then across:
  // the replicated run differs from one process as much (1.9e-6 measured). Sharding itself
  // adds only the norm's rounding, which Adam carries on: 1.2e-7 measured against the
  // replicated run with causal_lm's fused loss (3.7e-9 with the plain one, fused_loss: false).
  EXPECT_LT(two_ranks, 1e-5);
  EXPECT_LT(four_ranks, 1e-5);
  EXPECT_LT(replicated_two, 5e-7);
  EXPECT_LT(accumulated_difference, 1e-5);
  EXPECT_EQ(recomputed_difference, 0.0);
  // Two ranks' sums are exact whatever the pieces: bitwise.
  EXPECT_EQ(max_difference(saved_weights(last_checkpoint(dir, "two")),
                           saved_weights(last_checkpoint(dir, "small-buckets"))),
            0.0);
  std::printf("  2 ranks x 2 micro-batches %.3g; with activation checkpointing %.3g\n", accumulated_difference,
              recomputed_difference);
  EXPECT_GT(control_difference, 1e-3);

  // Each rank's AdamW state (two moments of float32) is half the model's: 8 bytes a parameter
  // over 2 ranks, padding and the archive's own bytes aside.
  std::int64_t parameters = 0;
  for (const auto& [name, tensor] : w_single) parameters += tensor.numel();
  const fs::path checkpoint = last_checkpoint(dir, "two");
  for (int rank = 0; rank < 2; ++rank) {
    const auto bytes = static_cast<double>(fs::file_size(optimizer_shard_file(checkpoint, rank, 2)));
    EXPECT_GT(bytes, 0.45 * 8 * parameters);
    EXPECT_LT(bytes, 0.60 * 8 * parameters);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ShardedGpt2, ::testing::Values("optimizer", "gradients", "parameters"));

// sharding: parameters (ZeRO-3) keeps each block's weights as the ranks' shards between its
// uses: gathered as the block's forward starts, released as it returns, gathered again for
// its backward and released once its gradients are reduce-scattered. The numbers are those
// of `gradients` (the same shards, reduce-scatters and steps): bitwise, with accumulation and
// with every block recomputed. With prefetch (the default) at most two of the four blocks are
// whole at once (the one computing and the next); without, one.
TEST(ShardedTraining, ParametersGathersOneBlockAtATimeAndTrainsAsGradientsDoes) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kGpt2Recipe, "num_layers: 2", "num_layers: 4"));
  const std::vector<std::pair<std::string, std::vector<std::string>>> variants = {
      {"plain", {"data.train.batch_size=8"}},
      {"accumulated", {"data.train.batch_size=4", "trainer.accumulate=2"}},
      {"recomputed", {"data.train.batch_size=8", "trainer.activation_checkpointing=all"}},
      {"bf16", {"data.train.batch_size=8", "precision.name=amp_bf16"}}};
  for (const auto& [variant, overrides] : variants) {
    std::map<std::string, std::map<std::string, at::Tensor>> weights;
    std::vector<std::string> modes{"gradients", "parameters"};
    if (variant == "plain") modes.push_back("one-block");
    for (const std::string& mode : modes) {
      std::vector<std::string> arguments = overrides;
      arguments.push_back("output=" + variant + "-" + mode);
      arguments.push_back("trainer.distributed.sharding=" + std::string(mode == "gradients" ? mode : "parameters"));
      if (mode == "one-block") arguments.push_back("trainer.distributed.prefetch=false");
      const auto ranks = run_ranks(dir, 2, {arguments});
      expect_all_exited(ranks);
      if (mode != "gradients") {
        const std::string most = mode == "one-block" ? "1" : "2";
        EXPECT_THAT(ranks[0].log, HasSubstr("at most " + most + " of the 4 blocks' weights were whole at once"))
            << variant << " " << mode;
      }
      weights[mode] = saved_weights(last_checkpoint(dir, variant + "-" + mode));
    }
    for (const std::string& mode : modes) {
      EXPECT_EQ(max_difference(weights["gradients"], weights[mode]), 0.0) << variant << " " << mode;
    }
  }
}

// ResNet-18 (batch norm in every block, channels_last, the stem and head in the root) under
// fp32 and amp_fp16's loss scaling: bitwise the replicated run, as the other modes; so with
// sync_batchnorm (statistics all-reduced inside the gathered blocks) and TensorBoard's
// weight histograms every step (which leave the released blocks out). `mixt diagnose` of the
// sharded recipe runs as one process, where there is nothing to shard.
TEST(ShardedTraining, ParametersTrainsResnet18AsTheReplicatedRun) {
  TempDir dir;
  dir.write("r.yaml", kResnetRecipe);
  const std::map<std::string, std::vector<std::string>> variants = {
      {"fp32", {"precision.name=fp32"}},
      {"amp_fp16", {"precision.name=amp_fp16"}},
      {"sync",
       {"precision.name=fp32", "trainer.distributed.sync_batchnorm=true",
        "callbacks=[{name: tensorboard, histograms_every: 1}]"}}};
  for (const auto& [variant, arguments] : variants) {
    std::vector<std::string> common = arguments;
    common.push_back("trainer.channels_last=true");
    std::vector<std::string> replicated_arguments = common, sharded_arguments = common;
    replicated_arguments.push_back("output=replicated-" + variant);
    sharded_arguments.push_back("output=parameters-" + variant);
    sharded_arguments.push_back("trainer.distributed.sharding=parameters");
    const auto replicated = run_ranks(dir, 2, {replicated_arguments}, 240);
    expect_all_exited(replicated);
    const auto sharded = run_ranks(dir, 2, {sharded_arguments}, 240);
    expect_all_exited(sharded);
    EXPECT_THAT(sharded[0].log, HasSubstr("at most 2 of the 8 blocks' weights were whole at once"));
    EXPECT_EQ(max_difference(saved_weights(last_checkpoint(dir, "replicated-" + variant)),
                             saved_weights(last_checkpoint(dir, "parameters-" + variant))),
              0.0)
        << variant;
  }
  const auto diagnosed =
      testing::run_mixt({"diagnose", "r.yaml", "trainer.distributed.sharding=parameters", "--steps", "2"}, dir.path());
  EXPECT_EQ(diagnosed.exit_code, 0) << diagnosed.output;
}

// A master-weight policy's masters are the ranks' float32 shards in every sharding mode
// (MasterWeights::keep_on_shards): gathered in the model's dtype (the shards rounded,
// FSDP2's param_dtype). Under `optimizer` the gradients are all-reduced as in the replicated
// run, so it is bitwise the run whose policy keeps its whole masters (`none`); `gradients`
// and `parameters` reduce them in float32 (reduce_dtype), bitwise each other and not the
// replicated run. For bf16_master, fp16_master's loss scaling and fp8_tensorwise's float8
// linears (no clipping: its norm over the shards would round apart). The checkpoint holds
// the whole masters as the policy writes them: a resume on the same ranks is bitwise, one
// process takes up the `optimizer` run's checkpoint bitwise as the replicated run's (its
// masters, the optimizer state resharded), and mixt export writes them.
TEST(ShardedTraining, MasterWeightPoliciesKeepTheirMastersAsShardsInEveryMode) {
  TempDir dir;
  std::string recipe = testing::replace_once(kGpt2Recipe, "num_layers: 2", "num_layers: 4");
  recipe = testing::replace_once(recipe, "clip_grad_norm: 0.5", "clip_grad_norm: 0");
  dir.write("r.yaml", testing::replace_once(recipe, "epochs: 1", "epochs: 2"));
  for (const std::string precision : {"bf16_master", "fp16_master", "fp8_tensorwise"}) {
    std::map<std::string, std::map<std::string, at::Tensor>> weights;
    for (const std::string mode : {"none", "optimizer", "gradients", "parameters"}) {
      const std::string output = precision + "-" + mode;
      const auto ranks = run_ranks(dir, 2,
                                   {{"output=" + output, "data.train.batch_size=8", "precision.name=" + precision,
                                     "trainer.distributed.sharding=" + mode}});
      expect_all_exited(ranks);
      if (mode != std::string("none")) {
        EXPECT_THAT(ranks[0].log, HasSubstr(" and float32 masters)")) << mode;
      }
      if (mode == std::string("parameters")) {
        EXPECT_THAT(ranks[0].log, HasSubstr("at most 2 of the 4 blocks' weights were whole at once")) << precision;
      }
      weights[mode] = saved_weights(checkpoint_of(dir, output, "epoch-0002"));
    }
    EXPECT_EQ(max_difference(weights["none"], weights["optimizer"]), 0.0) << precision;
    EXPECT_EQ(max_difference(weights["gradients"], weights["parameters"]), 0.0) << precision;
    EXPECT_GT(max_difference(weights["none"], weights["gradients"]), 0.0) << precision << ": not reduced in float32";
  }

  const fs::path saved = checkpoint_of(dir, "bf16_master-parameters", "epoch-0001");
  const std::string resume = "trainer.resume=" + saved.string();
  const auto again = run_ranks(dir, 2,
                               {{resume, "output=again", "data.train.batch_size=8", "precision.name=bf16_master",
                                 "trainer.distributed.sharding=parameters"}});
  expect_all_exited(again);
  EXPECT_EQ(max_difference(saved_weights(checkpoint_of(dir, "bf16_master-parameters", "epoch-0002")),
                           saved_weights(checkpoint_of(dir, "again", "epoch-0002"))),
            0.0);
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single", "precision.name=bf16_master"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto one = testing::run_mixt({"run", "r.yaml", resume, "output=one", "precision.name=bf16_master"}, dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // The `optimizer` run's checkpoint (masters written by the host from the shards) and the
  // replicated run's (written by the policy), after the same training bit for bit: one
  // process resuming either goes on identically.
  const auto resume_in_one = [&](const std::string& from, const std::string& output) {
    const auto result =
        testing::run_mixt({"run", "r.yaml", "trainer.resume=" + checkpoint_of(dir, from, "epoch-0001").string(),
                           "output=" + output, "precision.name=bf16_master"},
                          dir.path());
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return saved_weights(checkpoint_of(dir, output, "epoch-0002"));
  };
  EXPECT_EQ(max_difference(resume_in_one("bf16_master-optimizer", "one-from-shards"),
                           resume_in_one("bf16_master-none", "one-from-policys")),
            0.0);
  const auto reference = saved_weights(checkpoint_of(dir, "single", "epoch-0002"));
  const auto resumed_alone = saved_weights(checkpoint_of(dir, "one", "epoch-0002"));
  const double straight =
      max_difference(reference, saved_weights(checkpoint_of(dir, "bf16_master-parameters", "epoch-0002")));
  std::printf(
      "bf16_master: max |masters(1 process) - masters| after 2 epochs: 2 ranks under parameters %.3g; "
      "resumed in one process after the first %.3g\n",
      straight, max_difference(reference, resumed_alone));
  EXPECT_LT(max_difference(reference, resumed_alone), 2 * straight + 1e-6);
  const auto exported = testing::run_mixt({"export", saved.string(), "-o", "m.safetensors"}, dir.path());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
}

// The epoch events' val_loss_ema, in order.
std::vector<double> ema_losses(const fs::path& run) {
  std::vector<double> losses;
  std::istringstream lines(testing::read_file(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "epoch") losses.push_back(event.at("val_loss_ema").get<double>());
  }
  return losses;
}

// ema under sharding: parameters averages each rank's chunks of the weights
// (mixt/weight_shards.h) and gathers them whole for the checkpoint and the evaluation. The
// lerp is element-wise, so the average is bitwise the one `gradients` keeps whole on every
// rank, and so is its evaluation, under fp32 and under bf16_master (whose chunks are the
// float32 masters rounded as the model's weights are). A resume continues it on the same
// ranks bitwise, and in one process from the whole average; mixt export --ema writes it.
TEST(ShardedTraining, ParametersKeepsTheEmaOnTheShardsAsGradientsDoes) {
  TempDir dir;
  std::string recipe = testing::replace_once(kGpt2Recipe, "num_layers: 2", "num_layers: 4");
  recipe = testing::replace_once(recipe, "epochs: 1", "epochs: 2");
  dir.write("ema.yaml", recipe + "callbacks: [{name: ema, decay: 0.5}]\n");
  for (const std::string precision : {"fp32", "bf16_master"}) {
    std::map<std::string, std::map<std::string, at::Tensor>> ema;
    std::map<std::string, std::vector<double>> losses;
    for (const std::string mode : {"gradients", "parameters"}) {
      const std::string output = precision + "-" + mode;
      expect_all_exited(run_ranks(dir, 2,
                                  {{"output=" + output, "data.train.batch_size=8", "precision.name=" + precision,
                                    "trainer.distributed.sharding=" + mode}},
                                  120, {"run", "ema.yaml"}));
      ema[mode] = saved_weights(checkpoint_of(dir, output, "epoch-0002"), /*ema=*/true);
      losses[mode] = ema_losses(only_run_directory(dir.path() / output / "dp"));
    }
    EXPECT_EQ(max_difference(ema["gradients"], ema["parameters"]), 0.0) << precision;
    ASSERT_EQ(losses["parameters"].size(), 2u) << precision;
    EXPECT_EQ(losses["gradients"], losses["parameters"]) << precision;
    // Control: the average is not the weights (decay 0.5 over 8 steps).
    const double apart =
        max_difference(ema["parameters"], saved_weights(checkpoint_of(dir, precision + "-parameters", "epoch-0002")));
    std::printf("%s: max |ema - weights| after 2 epochs %.3g\n", precision.c_str(), apart);
    EXPECT_GT(apart, 1e-3) << precision;
  }

  const fs::path saved = checkpoint_of(dir, "fp32-parameters", "epoch-0001");
  const std::string resume = "trainer.resume=" + saved.string();
  expect_all_exited(run_ranks(
      dir, 2, {{resume, "output=again", "data.train.batch_size=8", "trainer.distributed.sharding=parameters"}}, 120,
      {"run", "ema.yaml"}));
  const auto straight = saved_weights(checkpoint_of(dir, "fp32-parameters", "epoch-0002"), /*ema=*/true);
  EXPECT_EQ(max_difference(straight, saved_weights(checkpoint_of(dir, "again", "epoch-0002"), /*ema=*/true)), 0.0);
  const auto one = testing::run_mixt({"run", "ema.yaml", resume, "output=one"}, dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const double alone = max_difference(straight, saved_weights(checkpoint_of(dir, "one", "epoch-0002"), /*ema=*/true));
  std::printf("ema: max |ema(2 ranks) - ema(resumed in one process)| after epoch 2: %.3g\n", alone);
  EXPECT_LT(alone, 1e-5);
  const auto exported = testing::run_mixt(
      {"export", checkpoint_of(dir, "fp32-parameters", "epoch-0002").string(), "-o", "e.safetensors", "--ema"},
      dir.path());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
}

// fp8_tensorwise (bf16_master's float32 masters under float8 linears): the float8 scales
// come from the whole weights, which every rank holds, so `optimizer` is bitwise the
// replicated run (no clipping here: its sharded norm would round apart); `gradients` reduces
// the masters' gradients in float32 where the replicated run all-reduces bfloat16 ones, and
// stays as near one process as the replicated run is (measured 0.0160 and 0.0159).
TEST(ShardedTraining, Fp8TensorwiseHoldsTheReplicatedRunsTolerance) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kGpt2Recipe, "{ name: fp32 }", "{ name: fp8_tensorwise }"));
  const std::vector<std::string> common = {"trainer.clip_grad_norm=0", "data.train.batch_size=8"};
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single", "trainer.clip_grad_norm=0"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  std::map<std::string, std::map<std::string, at::Tensor>> weights;
  for (const std::string mode : {"none", "optimizer", "gradients"}) {
    std::vector<std::string> overrides = common;
    overrides.push_back("output=" + mode);
    overrides.push_back("trainer.distributed.sharding=" + mode);
    expect_all_exited(run_ranks(dir, 2, {overrides}));
    weights[mode] = saved_weights(last_checkpoint(dir, mode));
  }
  const auto w_single = saved_weights(last_checkpoint(dir, "single"));
  const double replicated = max_difference(w_single, weights["none"]);
  const double gradients = max_difference(w_single, weights["gradients"]);
  std::printf("fp8_tensorwise: max |w(1 process) - w| replicated %.3g, sharding gradients %.3g\n", replicated,
              gradients);
  EXPECT_EQ(max_difference(weights["none"], weights["optimizer"]), 0.0);
  EXPECT_LT(gradients, 2 * replicated);
}

// resnet18 with SGD's momentum sharded: the same weights as the replicated run, batch norm's
// running statistics included; under amp_fp16's loss scaler (a step decided on the device)
// and bf16_master's float32 masters (gradients reduced in float32) too.
TEST(ShardedTraining, Resnet18AndThePoliciesTrainAsTheReplicatedRun) {
  TempDir dir;
  dir.write("r.yaml", kResnetRecipe);
  for (const std::string precision : {"fp32", "amp_fp16", "bf16_master"}) {
    const std::string policy = "precision.name=" + precision;
    const auto replicated = run_ranks(dir, 2, {{"output=replicated-" + precision, policy}}, 240);
    expect_all_exited(replicated);
    for (const std::string mode : {"optimizer", "gradients"}) {
      const std::string output = mode + "-" + precision;
      const auto sharded =
          run_ranks(dir, 2, {{"output=" + output, policy, "trainer.distributed.sharding=" + mode}}, 240);
      expect_all_exited(sharded);
      const double difference = max_difference(saved_weights(last_checkpoint(dir, "replicated-" + precision)),
                                               saved_weights(last_checkpoint(dir, output)));
      std::printf("resnet18 %s, sharding %s: max |w(replicated) - w(sharded)| = %.3g\n", precision.c_str(),
                  mode.c_str(), difference);
      if (precision == "bf16_master" && mode == "gradients") {
        // The masters' gradients are reduced in float32 (FSDP2's reduce_dtype), where the
        // replicated run all-reduces the model's bfloat16 ones: bfloat16 rounding apart,
        // which the bfloat16 running statistics of batch norm show most (measured 0.055 of 1.8).
        EXPECT_LT(difference, 0.1);
        EXPECT_GT(difference, 0.0) << "the reduction was not in float32";
      } else {
        EXPECT_EQ(difference, 0.0) << precision << ", " << mode;
      }
    }
  }
}

// The gpt2 recipe for 6 steps under `sharding`, whose policy (a fixture: fp32 otherwise)
// interrupts rank 1 at step 3 unless precision.interrupt_step=0.
std::string interrupted_recipe(const std::string& sharding) {
  const std::string plugin = testing::configured::fixture_plugin_dir() + "/libmixt_fixture_inf_injection.so";
  std::string recipe = "plugins: [" + plugin + "]\n" +
                       testing::replace_once(kGpt2Recipe, "{ name: fp32 }",
                                             "{ name: fixture_inf_injection, interrupt_rank: 1, interrupt_step: 3 }");
  recipe = testing::replace_once(recipe, "max_steps_per_epoch: 4", "max_steps_per_epoch: 6");
  return testing::replace_once(recipe, "distributed: { backend: gloo, timeout: 30 }",
                               "distributed: { backend: gloo, timeout: 30, sharding: " + sharding + " }");
}

// Interrupted mid-epoch (SIGINT on rank 1, agreed by both) and resumed on the same 2 ranks:
// bitwise the uninterrupted run. Mid-epoch, one process or four ranks would go on with other
// samples: refused (exit 2) saying why, before any shard is read. The same 2 ranks without
// sharding each read the whole optimizer state from both shard files; its weights are read in
// one process all the same (evaluate, export).
TEST(ShardedTraining, AMidEpochResumeIsBitwiseAndOtherRunShapesAreRefused) {
  TempDir dir;
  dir.write("r.yaml", interrupted_recipe("gradients"));
  const auto straight = run_ranks(dir, 2, {{"precision.interrupt_step=0", "output=straight"}});
  expect_all_exited(straight);
  const auto interrupted = run_ranks(dir, 2, {{"output=interrupted"}});
  expect_all_exited(interrupted, 130);
  const fs::path checkpoint = only_run_directory(dir.path() / "interrupted" / "dp") / "checkpoints" / "interrupted";
  ASSERT_TRUE(fs::exists(optimizer_shard_file(checkpoint, 0, 2)));
  ASSERT_TRUE(fs::exists(optimizer_shard_file(checkpoint, 1, 2)));
  const std::int64_t trained = read_checkpoint(checkpoint).header.at("batches_in_epoch").get<std::int64_t>();
  EXPECT_GT(trained, 0);
  EXPECT_LT(trained, 6);

  const std::string resume = "trainer.resume=" + checkpoint.string();
  const auto resumed = run_ranks(dir, 2, {{resume, "precision.interrupt_step=0", "output=resumed"}});
  expect_all_exited(resumed);
  EXPECT_THAT(resumed[0].log, HasSubstr("resumed from"));
  EXPECT_EQ(
      max_difference(saved_weights(last_checkpoint(dir, "straight")), saved_weights(last_checkpoint(dir, "resumed"))),
      0.0);
  // The epoch's checkpoint replaced `interrupted`, and its shards with it.
  EXPECT_FALSE(fs::exists(
      optimizer_shard_file(only_run_directory(dir.path() / "resumed" / "dp") / "checkpoints" / "interrupted", 0, 2)));

  const auto alone =
      testing::run_mixt({"run", "r.yaml", resume, "precision.interrupt_step=0", "output=alone"}, dir.path());
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_THAT(alone.output, HasSubstr("2 ranks, seed 0"));
  EXPECT_THAT(alone.output, HasSubstr("number of ranks the run was interrupted with"));
  const auto four = run_ranks(dir, 4, {{resume, "precision.interrupt_step=0", "output=four"}}, 240);
  expect_all_exited(four, 2);
  EXPECT_THAT(four[0].log, HasSubstr("4 ranks, seed 0"));
  const auto unsharded = run_ranks(
      dir, 2, {{resume, "precision.interrupt_step=0", "output=unsharded", "trainer.distributed.sharding=none"}});
  expect_all_exited(unsharded);
  // The replicated run rounds the clipping norm otherwise (5e-7 in ShardedGpt2).
  EXPECT_LT(
      max_difference(saved_weights(last_checkpoint(dir, "straight")), saved_weights(last_checkpoint(dir, "unsharded"))),
      1e-6);

  // mixt check outside torchrun cannot see the ranks' shards: it checks the rest.
  const auto checked = testing::run_mixt({"check", "r.yaml", resume}, dir.path());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  // Without sharding it reads every rank's shard into the whole state, as a run would.
  const auto checked_unsharded =
      testing::run_mixt({"check", "r.yaml", resume, "trainer.distributed.sharding=none"}, dir.path());
  EXPECT_EQ(checked_unsharded.exit_code, 0) << checked_unsharded.output;
  fs::rename(optimizer_shard_file(checkpoint, 1, 2), dir.path() / "shard-1");
  const auto missing_shard =
      testing::run_mixt({"check", "r.yaml", resume, "trainer.distributed.sharding=none"}, dir.path());
  EXPECT_EQ(missing_shard.exit_code, 2) << missing_shard.output;
  EXPECT_THAT(missing_shard.output, HasSubstr("has no optimizer shard for rank 1 of 2 (interrupted.optimizer-1-of-2)"));
  fs::rename(dir.path() / "shard-1", optimizer_shard_file(checkpoint, 1, 2));
  const auto evaluated = testing::run_mixt({"evaluate", checkpoint.string()}, dir.path());
  EXPECT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const auto exported = testing::run_mixt({"export", checkpoint.string(), "-o", "m.safetensors"}, dir.path());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
}

// An epoch's checkpoint of 2 sharded ranks goes on on 4 ranks under another mode, in one
// process, and without sharding; one process's whole checkpoint goes on on 2 sharded ranks.
// Each ends where one process running both epochs ends (the global batch is the same 16
// windows), within the rounding of other sums (1e-5, as ShardedGpt2). The control: the same
// 2-rank checkpoint with its two shard files swapped, so that each rank's moments land on
// the other half of every tensor, ends elsewhere.
TEST(ShardedTraining, AnEpochsCheckpointResumesOnOtherRanksAndInOneProcess) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kGpt2Recipe, "epochs: 1", "epochs: 2"));
  const auto single = testing::run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto two =
      run_ranks(dir, 2, {{"output=two", "data.train.batch_size=8", "trainer.distributed.sharding=gradients"}});
  expect_all_exited(two);
  const fs::path saved = checkpoint_of(dir, "two", "epoch-0001");
  const std::string resume = "trainer.resume=" + saved.string();

  const auto four = run_ranks(
      dir, 4, {{resume, "output=four", "data.train.batch_size=4", "trainer.distributed.sharding=parameters"}}, 240);
  expect_all_exited(four);
  const auto one = testing::run_mixt({"run", "r.yaml", resume, "output=one"}, dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto replicated = run_ranks(dir, 2, {{resume, "output=replicated", "data.train.batch_size=8"}});
  expect_all_exited(replicated);
  const std::string from_whole = "trainer.resume=" + checkpoint_of(dir, "single", "epoch-0001").string();
  const auto sharded_from_whole = run_ranks(
      dir, 2, {{from_whole, "output=from-whole", "data.train.batch_size=8", "trainer.distributed.sharding=optimizer"}});
  expect_all_exited(sharded_from_whole);
  fs::rename(optimizer_shard_file(saved, 0, 2), dir.path() / "shard-0");
  fs::rename(optimizer_shard_file(saved, 1, 2), optimizer_shard_file(saved, 0, 2));
  fs::rename(dir.path() / "shard-0", optimizer_shard_file(saved, 1, 2));
  const auto swapped = testing::run_mixt({"run", "r.yaml", resume, "output=swapped"}, dir.path());
  ASSERT_EQ(swapped.exit_code, 0) << swapped.output;

  const auto reference = saved_weights(checkpoint_of(dir, "single", "epoch-0002"));
  const auto difference = [&](const std::string& output) {
    return max_difference(reference, saved_weights(checkpoint_of(dir, output, "epoch-0002")));
  };
  std::printf(
      "max |w(1 process, 2 epochs) - w| after epoch 2: 2 sharded ranks straight %.3g; resumed on 4 ranks "
      "(parameters) %.3g, in one process %.3g, on 2 replicated ranks %.3g; one process's resumed on 2 sharded "
      "ranks %.3g; control (shards swapped) %.3g\n",
      difference("two"), difference("four"), difference("one"), difference("replicated"), difference("from-whole"),
      difference("swapped"));
  EXPECT_LT(difference("two"), 1e-5);
  EXPECT_LT(difference("four"), 1e-5);
  EXPECT_LT(difference("one"), 1e-5);
  EXPECT_LT(difference("replicated"), 1e-5);
  EXPECT_LT(difference("from-whole"), 1e-5);
  EXPECT_GT(difference("swapped"), 1e-4);
  EXPECT_THAT(four[0].log, HasSubstr("resumed from"));
}

// sharding: parameters interrupted mid-epoch (the checkpoint gathers every block) and resumed
// on the same ranks: bitwise the uninterrupted run.
TEST(ShardedTraining, ParametersResumesMidEpochBitwise) {
  TempDir dir;
  dir.write("r.yaml", interrupted_recipe("parameters"));
  const auto straight = run_ranks(dir, 2, {{"precision.interrupt_step=0", "output=straight"}});
  expect_all_exited(straight);
  const auto interrupted = run_ranks(dir, 2, {{"output=interrupted"}});
  expect_all_exited(interrupted, 130);
  const fs::path checkpoint = only_run_directory(dir.path() / "interrupted" / "dp") / "checkpoints" / "interrupted";
  const auto resumed =
      run_ranks(dir, 2, {{"trainer.resume=" + checkpoint.string(), "precision.interrupt_step=0", "output=resumed"}});
  expect_all_exited(resumed);
  EXPECT_EQ(
      max_difference(saved_weights(last_checkpoint(dir, "straight")), saved_weights(last_checkpoint(dir, "resumed"))),
      0.0);
}

// An inf in rank 1's shard only: its found-inf flag, all-reduced by the policy, makes both
// ranks skip the step, as in the replicated run.
TEST(ShardedTraining, AnInfInOneRanksShardMakesEveryRankSkip) {
  TempDir dir;
  const std::string plugin = testing::configured::fixture_plugin_dir() + "/libmixt_fixture_inf_injection.so";
  dir.write("r.yaml", "plugins: [" + plugin + "]\n" +
                          testing::replace_once(kGpt2Recipe, "{ name: fp32 }",
                                                "{ name: fixture_inf_injection, inject_rank: 1, inject_step: 2, "
                                                "inject_at: step, sync_found_inf: true }"));
  const auto ranks = run_ranks(dir, 2, {{"trainer.distributed.sharding=gradients"}});
  expect_all_exited(ranks);
  EXPECT_THAT(ranks[0].log, HasSubstr("rank 0 skipped step 2"));
  EXPECT_THAT(ranks[1].log, HasSubstr("rank 1 skipped step 2"));
}

// A rank lost mid-run (killed between the collectives of the sharded step): the other exits
// 1 within the timeout, naming the collective, and writes no `interrupted` checkpoint (the
// lost rank's optimizer shard is gone); the last epoch's checkpoint and both its shards stay.
TEST(ShardedTraining, ALostRankEndsTheOtherWithinTheTimeoutAndKeepsTheLastCompleteCheckpoint) {
  TempDir dir;
  std::string recipe = testing::replace_once(kGpt2Recipe, "epochs: 1", "epochs: 100000");
  recipe = testing::replace_once(recipe, "distributed: { backend: gloo, timeout: 30 }",
                                 "distributed: { backend: gloo, timeout: 15, sharding: gradients }");
  dir.write("r.yaml", recipe);
  const int port = testing::free_port();
  testing::ChildProcess rank0({testing::configured::mixt_executable(), "run", "r.yaml"},
                              testing::rank_environment(0, 2, port), dir.path(), dir.path() / "0.log");
  testing::ChildProcess rank1({testing::configured::mixt_executable(), "run", "r.yaml"},
                              testing::rank_environment(1, 2, port), dir.path(), dir.path() / "1.log");
  ASSERT_TRUE(testing::rank0_logged(rank0, dir.path() / "0.log", "epoch 3/"));
  const testing::LostRankEnd end = testing::kill_rank_1(rank0, rank1, dir.path() / "0.log");
  ASSERT_TRUE(end.code) << "rank 0 still running 45 s after rank 1 was killed\n" << end.log;
  EXPECT_EQ(*end.code, 1) << end.log;
  EXPECT_THAT(end.log, HasSubstr("failed on rank 0 of 2 (gloo)"));
  EXPECT_LT(end.seconds, 15.0 + 10.0);
  const fs::path checkpoints = only_run_directory(dir.path() / "runs" / "dp") / "checkpoints";
  EXPECT_FALSE(fs::exists(checkpoints / "interrupted")) << end.log;
  const fs::path last = fs::canonical(checkpoints / "last");
  EXPECT_TRUE(fs::exists(optimizer_shard_file(last, 0, 2)));
  EXPECT_TRUE(fs::exists(optimizer_shard_file(last, 1, 2)));
}

TEST(ShardedTraining, OneRankWarnsThatThereIsNothingToShard) {
  TempDir dir;
  dir.write("r.yaml", kGpt2Recipe);
  const auto ranks = run_ranks(dir, 1, {{"trainer.distributed.sharding=optimizer"}});
  expect_all_exited(ranks);
  EXPECT_THAT(ranks[0].log, HasSubstr("sharding: optimizer with one rank: nothing to shard"));
  const auto bad = testing::run_mixt({"check", "r.yaml", "trainer.distributed.sharding=everything"}, dir.path());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("command line 'trainer.distributed.sharding=everything'"));
  EXPECT_THAT(bad.output, HasSubstr("expected none, optimizer, gradients or parameters"));
}

}  // namespace
}  // namespace mixt
