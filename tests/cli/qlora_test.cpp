// QLoRA: `adapter: {quantize_base: nf4}` (framework/src/assembly/quantize_base.cpp,
// mixt/helpers/nf4.h) against tests/golden/make_qlora_golden.py (the qlora_golden fixture):
// torchao 0.18's NF4Tensor as torchtune's FrozenNF4Linear holds it, on every linear layer of
// transformers' LlamaForCausalLM's decoder, under PEFT's LoRA:
//  - `mixt run` from the fixture's base and PEFT's initial adapter folder: 20 AdamW steps
//    give every loss and gradient norm of the reference and its final adapter tensors, bit
//    for bit (with trainer.activation_checkpointing: all too); under amp_bf16 against the same
//    loop with the forward and the loss under torch.autocast("cpu", bfloat16): every loss and
//    gradient norm bit for bit;
//  - the base's float weights are gone: the model's parameter storage shrinks by the 14
//    decoder projections' float32 bytes, less one number each;
//  - every other precision policy trains with it (3 steps, finite losses);
//  - two data-parallel ranks train the reference's adapter, within float tolerance;
//  - a checkpoint holds no base weight, and resuming from it continues;
//  - bad input: an unknown format, a layer that is not whole blocks of 64: exit 2;
//  - recipes/llama/qlora.yaml trains on a transformers folder and an instruction JSONL.
//
// Measured (CPU, one thread, mixt linking the torch the reference runs): the 20 losses and
// gradient norms equal (fp32, checkpointed, amp_bf16), the 12 final adapter tensors equal
// (largest difference 0); two data-parallel ranks: the adapter within 1.7e-5 of its largest value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "adapter_recipes.h"
#include "assembly/adapters.h"
#include "assembly/components.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/safetensors.h"
#include "plugins.h"
#include "ranks.h"
#include "recipe/recipe_loader.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

const fs::path kGolden = MIXT_QLORA_GOLDEN_DIR;
const fs::path kInstruct = fs::path(testing::configured::binary_dir()) / "tests" / "instruct_golden";
const fs::path kSource = testing::source_dir();
// Two ranks' averaged gradients round differently from one batch's: measured 8.9e-6 of a largest
// value of 0.51 after 20 steps (1.7e-5 of it).
constexpr double kDataParallelTolerance = 1e-4;

nlohmann::json golden() { return nlohmann::json::parse(testing::read_file(kGolden / "training.json")); }

using testing::quoted;

std::string from_init() { return "{ from: " + quoted(kGolden / "init_adapter") + ", quantize_base: nf4 }"; }

// The reference loop's recipe over the fixture's folders.
std::string recipe(const std::string& adapter, const std::string& trainer = "", const std::string& precision = "fp32") {
  return testing::reference_loop_recipe(kGolden, "qlora", adapter, trainer, precision);
}

struct Steps {
  std::vector<double> losses, grad_norms;
};

Steps steps_of(const fs::path& run_dir) {
  Steps s;
  std::istringstream lines(testing::read_file(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] != "step") continue;
    s.losses.push_back(event["loss"].get<double>());
    s.grad_norms.push_back(event["grad_norm"].get<double>());
  }
  return s;
}

class QloraTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(QloraTraining, TwentyAdamWStepsEqualPeftOverTorchaosNf4) {
  const nlohmann::json g = golden();
  TempDir dir;
  const bool amp = GetParam() == "amp_bf16";
  dir.write("qlora.yaml", recipe(from_init(), GetParam() == "checkpointed" ? "activation_checkpointing: all, " : "",
                                 amp ? "amp_bf16" : "fp32"));
  const CommandResult run = run_mixt({"run", "qlora.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("the base's 14 linear layers in NF4: 4.7 MB of float32 weights held in 609.5 kB"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "qlora");
  ASSERT_FALSE(run_dir.empty());
  const Steps s = steps_of(run_dir);
  const std::vector<double> losses = g[amp ? "amp_losses" : "losses"], norms = g[amp ? "amp_grad_norms" : "grad_norms"];
  double loss_difference = 0;
  for (std::size_t i = 0; i < std::min(s.losses.size(), losses.size()); ++i) {
    loss_difference = std::max(loss_difference, std::abs(s.losses[i] - losses[i]));
  }
  std::cout << "[ measured ] " << GetParam() << ": largest loss difference from the reference's " << loss_difference
            << "\n";
  EXPECT_EQ(s.losses, losses);
  EXPECT_EQ(s.grad_norms, norms);
  if (amp) return;  // the reference keeps fp32's final adapter only

  const NamedTensors trained = load_safetensors(run_dir / "adapter" / "adapter_model.safetensors").tensors;
  const NamedTensors reference = load_safetensors(kGolden / "final_adapter" / "adapter_model.safetensors").tensors;
  ASSERT_EQ(trained.size(), reference.size());
  std::map<std::string, at::Tensor> by_name(reference.begin(), reference.end());
  double largest = 0;
  for (const auto& [name, tensor] : trained) {
    ASSERT_TRUE(by_name.count(name)) << name << " is not in PEFT's adapter";
    EXPECT_TRUE(at::equal(tensor, by_name[name])) << name;
    largest = std::max(largest, (tensor - by_name[name]).abs().max().item<double>());
  }
  std::cout << "[ measured ] " << trained.size() << " adapter tensors, largest difference from the reference's "
            << largest << "\n";
}

INSTANTIATE_TEST_SUITE_P(Runs, QloraTraining, ::testing::Values("plain", "checkpointed", "amp_bf16"),
                         [](const auto& info) { return info.param; });

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

// The bytes the model's parameters hold (each storage once).
std::int64_t parameter_bytes(torch::nn::Module& model) {
  std::set<const void*> seen;
  std::int64_t bytes = 0;
  for (const auto& p : model.parameters()) {
    if (seen.insert(p.storage().data()).second) bytes += static_cast<std::int64_t>(p.storage().nbytes());
  }
  return bytes;
}

TEST(QloraMemory, TheBasesFloatWeightsAreFreed) {
  const auto build = [](const std::string& adapter) {
    const RecipeNodePtr root =
        parse_yaml("model: {name: llama, from: " + quoted(kGolden / "base") + "}\nadapter: " + adapter, "test");
    const Config recipe(root, "");
    auto model = build_model(recipe.section("model"), plugins().registry, ModelContext{});
    const std::int64_t before = parameter_bytes(*model);
    [[maybe_unused]] const auto applied =
        apply_adapter(recipe.section("adapter"), plugins().registry, *model, AdapterContext{});
    return std::make_pair(model, before);
  };
  const auto [lora, lora_before] = build("{name: lora, rank: 4, targets: [q_proj, v_proj, mlp.down_proj]}");
  const auto [qlora, qlora_before] =
      build("{name: lora, rank: 4, targets: [q_proj, v_proj, mlp.down_proj], quantize_base: nf4}");
  ASSERT_EQ(lora_before, qlora_before);
  // The decoder's 14 projections, float32: 2 x (2 x 256 x 256 + 2 x 128 x 256 + 3 x 512 x 256) weights.
  const std::int64_t projections = 2 * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256);
  const std::int64_t lora_bytes = parameter_bytes(*lora), qlora_bytes = parameter_bytes(*qlora);
  EXPECT_EQ(lora_bytes - qlora_bytes, projections * 4 - 14 * 4);
  std::cout << "[ measured ] parameter bytes: LoRA " << lora_bytes << ", QLoRA " << qlora_bytes << " (the "
            << projections << " projection weights: " << projections * 4 << " bytes in float32, " << projections / 2
            << " of 4-bit codes in NF4)\n";
  for (const LinearLayer& layer : linear_layers(*qlora)) {
    const bool decoder =
        layer.name.find(".layers.") != std::string::npos && layer.name.find("lora_") == std::string::npos;
    EXPECT_EQ(layer.weight.storage().nbytes() == 4u, decoder) << layer.name;
  }
}

class QloraPolicies : public ::testing::TestWithParam<std::string> {};

// Three steps under each policy: exit 0, finite losses, the NF4 note (the layers are in the
// policy's dtype when quantised: bfloat16 for bf16_true and bf16_master, float16 for
// fp16_master). fp32 and amp_bf16 are compared with the reference above.
TEST_P(QloraPolicies, TrainsUnderThePolicy) {
  TempDir dir;
  dir.write("qlora.yaml", recipe(from_init(), "max_steps_per_epoch: 3, ", GetParam()));
  const CommandResult run = run_mixt({"run", "qlora.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("the base's 14 linear layers in NF4"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "qlora");
  const Steps s = steps_of(run_dir);
  ASSERT_EQ(s.losses.size(), 3u);
  for (const double loss : s.losses) EXPECT_TRUE(std::isfinite(loss)) << run.output;
  std::cout << "[ measured ] " << GetParam() << ": losses " << s.losses[0] << ", " << s.losses[1] << ", " << s.losses[2]
            << " (fp32's: " << golden()["losses"][0] << ", " << golden()["losses"][1] << ", " << golden()["losses"][2]
            << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Policies, QloraPolicies,
                         ::testing::Values("amp_bf16", "amp_fp16", "custom_scaler", "bf16_true", "bf16_master",
                                           "fp16_master", "fp8_tensorwise", "fp8_rowwise", "fp8_delayed", "tf32"),
                         [](const auto& info) { return info.param; });

// A checkpoint holds the adapter and one number for each NF4 weight: the base is model.from's,
// quantised again when the run resumes (the same codes: the quantisation is deterministic).
TEST(QloraCheckpoint, HoldsNoBaseWeightAndResumes) {
  TempDir dir;
  dir.write("qlora.yaml", recipe(from_init(), "max_steps_per_epoch: 2, "));
  const CommandResult run = run_mixt({"run", "qlora.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "qlora");
  std::vector<fs::path> checkpoints;
  for (const auto& entry : fs::recursive_directory_iterator(run_dir / "checkpoints")) {
    if (entry.is_regular_file()) checkpoints.push_back(entry.path());
  }
  ASSERT_FALSE(checkpoints.empty());
  std::int64_t bytes = 0;
  for (const auto& file : checkpoints) bytes += static_cast<std::int64_t>(fs::file_size(file));
  const std::int64_t projections = 2 * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256);
  std::cout << "[ measured ] checkpoint " << bytes << " bytes (the projections in float32: " << projections * 4
            << ")\n";
  EXPECT_LT(bytes, projections);  // under a quarter of the float32 projections: none of them is in it
  const CommandResult resumed =
      run_mixt({"run", "qlora.yaml", "trainer.epochs=2", "trainer.resume=" + run_dir.string()}, dir.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// Data parallel on two ranks of batch 2 against the one-process reference of batch 4: each
// rank quantises model.from's base the same way (the NF4 weights are not broadcast), only
// the adapter's gradients are reduced; the final adapter agrees within float tolerance.
TEST(QloraDataParallel, TwoRanksTrainTheReferencesAdapter) {
  const nlohmann::json g = golden();
  TempDir dir;
  dir.write("r.yaml", recipe(from_init()));
  const auto ranks = testing::run_ranks(dir, 2, {{"data.train.batch_size=2"}}, 300);
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].log << "\n---\n" << ranks[1].log;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].log;
  EXPECT_THAT(ranks[0].log, HasSubstr("data parallel: 2 ranks, gloo backend, cpu"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "qlora");
  ASSERT_FALSE(run_dir.empty());
  const NamedTensors trained = load_safetensors(run_dir / "adapter" / "adapter_model.safetensors").tensors;
  std::map<std::string, at::Tensor> reference;
  for (auto& [name, tensor] : load_safetensors(kGolden / "final_adapter" / "adapter_model.safetensors").tensors) {
    reference[name] = tensor;
  }
  ASSERT_EQ(trained.size(), reference.size());
  double largest = 0, scale = 0;
  for (const auto& [name, tensor] : trained) {
    largest = std::max(largest, (tensor - reference.at(name)).abs().max().item<double>());
    scale = std::max(scale, reference.at(name).abs().max().item<double>());
  }
  std::cout << "[ measured ] 2 ranks x batch 2 against 1 process x batch 4: largest adapter difference " << largest
            << " (max |value| " << scale << ")\n";
  EXPECT_LE(largest, kDataParallelTolerance * scale);
}

// The ema callback averages the adapter; an NF4 weight is its own average (no float copy of
// it is made), and evaluating with the average leaves the base as it was.
TEST(QloraCallbacks, EmaAveragesTheAdapter) {
  TempDir dir;
  std::string text = recipe(from_init(), "max_steps_per_epoch: 3, ");
  text.replace(text.find(", shuffle: false }"), 18,
               ", shuffle: false, to: 0.8 }\n  val: { name: tokens, files: " + quoted(kGolden / "tokens.bin") +
                   ", format: nanogpt, vocab: 96, context: 32, batch_size: 4, "
                   "from: 0.8 }");
  text.replace(text.find("callbacks: ["), 12, "callbacks: [{ name: ema }, ");
  dir.write("qlora.yaml", text);
  const CommandResult run = run_mixt({"run", "qlora.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("val loss"));
}

CommandResult check_with(const std::string& adapter, TempDir& dir, const std::string& model = "") {
  std::string text = recipe(adapter);
  if (!model.empty()) {
    const auto start = text.find("model: ");
    text.replace(start, text.find('\n', start) - start, "model: " + model);
  }
  dir.write("qlora.yaml", text);
  return run_mixt({"check", "qlora.yaml"}, dir.path());
}

TEST(QloraBadInput, AnUnknownFormatNamesNf4) {
  TempDir dir;
  const CommandResult r = check_with("{ name: lora, rank: 4, targets: [q_proj], quantize_base: nf5 }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.quantize_base"));
  EXPECT_THAT(r.output, HasSubstr("expected nf4, got \"nf5\""));
}

TEST(QloraBadInput, ShardingTheParametersIsRefused) {
  TempDir dir;
  std::string text = recipe(from_init());
  text.replace(text.find("trainer: { "), 11, "trainer: { distributed: { sharding: parameters }, ");
  dir.write("qlora.yaml", text);
  const CommandResult r = run_mixt({"check", "qlora.yaml"}, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.quantize_base"));
  EXPECT_THAT(r.output, HasSubstr("sharding: parameters does not shard a base held in NF4 yet"));
}

TEST(QloraBadInput, ALayerThatIsNotWholeBlocksOf64IsNamed) {
  TempDir dir;
  const CommandResult r =
      check_with("{ name: lora, rank: 4, targets: [q_proj], quantize_base: nf4 }", dir,
                 "{ name: llama, vocab_size: 96, context_length: 32, num_layers: 1, num_heads: 2, num_kv_heads: 2, "
                 "hidden_dim: 36, mlp_dim: 64 }");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.quantize_base"));
  EXPECT_THAT(r.output, HasSubstr("'model.layers.0.self_attn.q_proj' cannot be held in NF4: a weight of [36, 36] "
                                  "(1296 values) is not a whole number of NF4 blocks of 64"));
}

TEST(QloraRecipe, TrainsOnATransformersFolderAndAnInstructionFile) {
  TempDir dir;
  const CommandResult run =
      run_mixt({"run", (kSource / "recipes/llama/qlora.yaml").string(), "model.from=" + (kInstruct / "llama3").string(),
                "data.train.file=" + (kInstruct / "train.jsonl").string(),
                "data.val.file=" + (kInstruct / "train.jsonl").string(), "data.train.context=96", "data.val.context=96",
                "trainer.max_steps_per_epoch=3", "trainer.threads=1", "output=" + (dir.path() / "runs").string()},
               dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 2 layers x 7 projections; lm_head (untied here) stays in float.
  EXPECT_THAT(run.output, HasSubstr("the base's 14 linear layers in NF4"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "llama_qlora");
  ASSERT_FALSE(run_dir.empty());
  EXPECT_TRUE(fs::exists(run_dir / "adapter" / "adapter_model.safetensors"));
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(run_dir / "adapter" / "adapter_config.json"));
  EXPECT_EQ(config["r"], 16);
  EXPECT_EQ(config["target_modules"].size(), 7u);

  // The commands that build the model quantise model.from's base again and load the
  // checkpoint's adapter: evaluate gives the run's validation loss.
  std::smatch val;
  ASSERT_TRUE(std::regex_search(run.output, val, std::regex("validation: loss ([0-9.]+)"))) << run.output;
  const CommandResult evaluated = run_mixt({"evaluate", run_dir.string()}, dir.path());
  EXPECT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_THAT(evaluated.output, ::testing::ContainsRegex("loss +" + val[1].str()));
  const CommandResult generated =
      run_mixt({"generate", run_dir.string(), "--chat", "--prompt", "Hi", "--max-new-tokens", "4"}, dir.path());
  EXPECT_EQ(generated.exit_code, 0) << generated.output;
  // Export writes float weights, which the base no longer has: refused, nothing written. The
  // checkpoint alone (safetensors without a merge) holds no base at all: it says so.
  const std::vector<std::pair<std::vector<std::string>, std::string>> exports = {
      {{"-o", "model.onnx"}, "held in NF4 (adapter.quantize_base: nf4)"},
      {{"-o", "model.safetensors", "--merge-adapter"}, "held in NF4 (adapter.quantize_base: nf4)"},
      {{"-o", "model.safetensors"}, "holds the adapter's tensors, not the frozen base"}};
  for (const auto& [arguments, message] : exports) {
    std::vector<std::string> command = {"export", run_dir.string()};
    command.insert(command.end(), arguments.begin(), arguments.end());
    const CommandResult exported = run_mixt(command, dir.path());
    EXPECT_EQ(exported.exit_code, 2) << exported.output;
    EXPECT_THAT(exported.output, HasSubstr(message));
    EXPECT_FALSE(fs::exists(dir.path() / arguments[1])) << arguments[1];
  }
}

}  // namespace
}  // namespace mixt
