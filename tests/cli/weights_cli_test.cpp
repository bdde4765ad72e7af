// End to end: weights in and out of the real `mixt` binary — `mixt export` of a trained
// run, `model.weights:` (strict and not), `mixt predict` against torchvision's logits, and
// `mixt list model` with torchvision's parameter counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "test_support.h"

namespace mixt {
namespace {

const fs::path kParity = testing::configured::model_parity_dir();

// kTinyRecipe, shortened: one epoch of 256 images, no validation.
const std::vector<std::string> kShortRun = {"data.train.limit=256", "data.val=null", "trainer.epochs=1"};

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& item : tensors) {
    if (item.first == name) return item.second;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(WeightsCli, ExportedCheckpointRoundTripsWithoutLoss) {
  TempDir dir;
  dir.write("r.yaml", kTinyRecipe);
  std::vector<std::string> args = {"run", "r.yaml"};
  args.insert(args.end(), kShortRun.begin(), kShortRun.end());
  const CommandResult run = run_mixt(args, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "tiny")) run_dir = entry.path();

  const CommandResult exported = run_mixt(
      {"export", (run_dir / "checkpoints" / "last").string(), "--format", "safetensors", "-o", "model.safetensors"},
      dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const NamedTensors file = load_safetensors(dir.path() / "model.safetensors").tensors;
  // A .pth name would promise a torch.save pickle.
  const CommandResult pth = run_mixt({"export", run_dir.string(), "-o", "model.pth"}, dir.path());
  EXPECT_EQ(pth.exit_code, 2) << pth.output;
  EXPECT_THAT(pth.output, HasSubstr("mixt: error: -o model.pth: mixt export writes safetensors, which torch.load cannot read\n"
                            "  hint: name it model.safetensors"))
      << pth.output;
  EXPECT_FALSE(fs::exists(dir.path() / "model.pth"));
  // Any case (model.PTH), and predict's --output too.
  const CommandResult upper = run_mixt({"export", run_dir.string(), "-o", "model.PTH"}, dir.path());
  EXPECT_EQ(upper.exit_code, 2) << upper.output;
  EXPECT_FALSE(fs::exists(dir.path() / "model.PTH"));

  // The checkpoint's model, loaded the way `mixt run --resume` loads it.
  testing::BuiltPlugins plugins;
  const auto model = plugins.registry.make_model(
      Config(parse_yaml("{name: simple_cnn, channels: [8, 16], hidden: 32}", "t"), "model"), ModelContext{});
  CheckpointContents checkpoint = read_checkpoint(resolve_checkpoint(run_dir));
  torch::serialize::InputArchive archive;
  checkpoint.archive.read("model", archive);
  model->load(archive);
  const NamedTensors state = state_dict(*model);
  ASSERT_EQ(file.size(), state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(file[i].first, state[i].first);
    EXPECT_TRUE(at::equal(file[i].second, state[i].second)) << state[i].first;  // bit for bit
  }

  // And back: the exported file as `model.weights` gives the checkpoint model's outputs.
  at::manual_seed(3);
  const at::Tensor batch = at::randn({4, 1, 28, 28});
  save_safetensors(dir.path() / "batch.safetensors", {{"input", batch}});
  dir.write("p.yaml", testing::replace_once(kTinyRecipe, "hidden: 32 }", "hidden: 32, weights: model.safetensors }"));
  const CommandResult predicted =
      run_mixt({"predict", "p.yaml", "--input", "batch.safetensors", "--output", "out.safetensors"}, dir.path());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  const CommandResult pt =
      run_mixt({"predict", "p.yaml", "--input", "batch.safetensors", "--output", "out.pt"}, dir.path());
  EXPECT_EQ(pt.exit_code, 2) << pt.output;
  EXPECT_THAT(pt.output, HasSubstr("--output out.pt: mixt predict writes safetensors"));
  model->eval();
  at::NoGradGuard no_grad;
  EXPECT_TRUE(
      at::equal(find(load_safetensors(dir.path() / "out.safetensors").tensors, "output"), model->forward(batch)));
}

// A master-weight run's checkpoint holds a reduced-precision model and float32 masters:
// mixt export writes the masters, the real weights (float32 values the model's dtype
// cannot hold), not the model. bf16_true has no masters: its bfloat16 weights are written
// widened to float32, exactly.
fs::path train_tiny(const TempDir& dir, const std::string& policy) {
  std::vector<std::string> args = {"run", "r.yaml", "precision.name=" + policy, "output=" + policy};
  args.insert(args.end(), kShortRun.begin(), kShortRun.end());
  const CommandResult run = run_mixt(args, dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / policy / "tiny")) run_dir = entry.path();
  return run_dir;
}

TEST(WeightsCli, ExportWritesAPolicysMasterWeightsInFloat32) {
  TempDir dir;
  dir.write("r.yaml", kTinyRecipe);
  for (const auto& [policy, dtype] : {std::pair{"bf16_master", at::kBFloat16}, std::pair{"fp16_master", at::kHalf},
                                      std::pair{"bf16_true", at::kBFloat16}}) {
    const fs::path run_dir = train_tiny(dir, policy);
    const std::string file = std::string(policy) + ".safetensors";
    const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    bool finer_than_model = false;
    for (const auto& [name, tensor] : load_safetensors(dir.path() / file).tensors) {
      if (!tensor.is_floating_point()) continue;
      EXPECT_EQ(tensor.scalar_type(), at::kFloat) << policy << " " << name;
      if (name.find("weight") != std::string::npos) {
        finer_than_model |= !at::equal(tensor.to(dtype).to(at::kFloat), tensor);
      }
    }
    EXPECT_EQ(finer_than_model, std::string(policy) != "bf16_true")
        << policy << ": the masters hold values the model's dtype cannot (bf16_true has none)";
  }
}

TEST(WeightsCli, PredictMatchesTorchvisionLogits) {
  TempDir dir;
  const fs::path weights = kParity / "resnet18.weights.safetensors";
  dir.write("r.yaml", "model: { name: resnet18, num_classes: 10, weights: " + weights.string() + " }\n");
  const CommandResult result = run_mixt({"predict", "r.yaml", "--input", (kParity / "resnet18.io.safetensors").string(),
                                         "--output", "logits.safetensors"},
                                        dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // resnet18.io.safetensors holds several tensors: predict takes the one named "input".
  const at::Tensor got = find(load_safetensors(dir.path() / "logits.safetensors").tensors, "output");
  const at::Tensor expected = find(load_safetensors(kParity / "resnet18.io.safetensors").tensors, "logits");
  EXPECT_LE((got - expected).abs().max().item<double>() / expected.abs().max().item<double>(), 1e-5);
}

TEST(WeightsCli, MismatchingWeightsAreOneClearError) {
  TempDir dir;
  const std::string weights = (kParity / "resnet18.weights.safetensors").string();
  save_safetensors(dir.path() / "x.safetensors", {{"input", at::zeros({1, 3, 64, 64})}});
  const std::vector<std::string> args = {"predict", "r.yaml", "--input", "x.safetensors", "--output", "o.safetensors"};

  dir.write("r.yaml", "model: { name: resnet18, weights: " + weights + " }\n");  // 1000 classes vs 10
  CommandResult result = run_mixt(args, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: error: "));
  EXPECT_THAT(result.output, HasSubstr("weights do not match the model"));
  EXPECT_THAT(result.output, HasSubstr("fc.weight: file [10, 512] vs model [1000, 512]"));
  EXPECT_THAT(result.output, HasSubstr("strict: false"));

  dir.write("r.yaml", "model: { name: resnet18, weights: " + weights + ", strict: false }\n");
  result = run_mixt(args, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("warning"));
  EXPECT_THAT(result.output, HasSubstr("loaded 120 tensors"));

  dir.write("r.yaml", "model: { name: resnet18, weights: nowhere.safetensors }\n");
  result = run_mixt(args, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("nowhere.safetensors"));

  // The model is built for --input's samples: a batch of 3-channel images missing its batch
  // dimension says so, and no weights at all is a warning (untrained outputs).
  save_safetensors(dir.path() / "unbatched.safetensors", {{"input", at::zeros({3, 64, 64})}});
  dir.write("r.yaml", "model: { name: resnet18, num_classes: 10, weights: " + weights + " }\n");
  result = run_mixt({"predict", "r.yaml", "--input", "unbatched.safetensors", "--output", "o.safetensors"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt predict builds the model for the samples of unbatched.safetensors: [64, 64] "
                               "(its first dimension, 3, is the batch)"))
      << result.output;
  dir.write("r.yaml", "model: { name: resnet18, num_classes: 10 }\n");
  result = run_mixt(args, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: warning: model.weights is not set"));

  result = run_mixt({"export", "nowhere", "--format", "tflite", "-o", "x"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("unknown export format 'tflite'"));

  // predict builds only the model, and read no unknown-key check: a misspelt key predicted
  // with untrained weights (or 1000 classes) and exit 0.
  dir.write("r.yaml", "model: { name: resnet18, num_classes: 10 }\n");
  result = run_mixt({"predict", "r.yaml", "model.weigths=" + weights, "--input", "x.safetensors", "--output",
                     "o.safetensors"},
                    dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("model.weigths: unknown key 'weigths' in 'model'"))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("did you mean 'weights'"));
}

TEST(WeightsCli, ListShowsParamsAndGflops) {
  const CommandResult result = run_mixt({"list", "model", "resnet*"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("resnet50"));
  EXPECT_THAT(result.output, HasSubstr("25,557,032 params, 4.089 GFLOPs at 3x224x224"));
}

}  // namespace
}  // namespace mixt
