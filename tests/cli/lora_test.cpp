// LoRA and DoRA adapters (plugins/adapters/lora, mixt/adapter.h) against PEFT over
// transformers' LlamaForCausalLM (tests/golden/make_lora_golden.py, the lora_golden fixture;
// DoRA's references in its dora/ folder):
//  - `mixt run` from the fixture's save_pretrained base (model.from) and PEFT's initial
//    adapter folder (adapter.from): 20 AdamW steps, the gradient norm clipped, in the data
//    order of `shuffle: false`, give every loss and gradient norm of a plain PyTorch loop
//    over peft.get_peft_model's model, and the run's adapter/adapter_model.safetensors holds
//    PEFT's final adapter tensors, bit for bit (with trainer.activation_checkpointing: all
//    too); PEFT loads that folder (PeftModel.from_pretrained) and gives the final adapter's
//    logits; `mixt export RUN --format transformers` writes PEFT's merge_and_unload()
//    weights, which transformers loads with the merged model's logits;
//  - mixt reads PEFT's initial and final adapter folders and gives PEFT's logits; a fresh
//    dora's lora_magnitude_vector is PEFT's initial one;
//  - under fp8_tensorwise the adapter wraps the policy's float8 LinearFunction;
//  - bad input: a target that matches nothing, a rank above a layer's size, an adapter of
//    another base (a dora magnitude too), --merge-adapter without an adapter, a transformers
//    export over a folder that holds files, an adapter that cannot merge: exit 2 with the
//    reason, nothing written;
//  - recipes/llama/lora.yaml trains on a transformers folder; its ONNX and TorchScript exports
//    with --merge-adapter give the unmerged exports' outputs with no adapter tensors.
//
// Measured (CPU, one thread, mixt linking the torch the reference runs): the 20 losses and
// gradient norms equal, the 12 final adapter tensors equal (largest difference 0), PEFT's
// logits from mixt's adapter folder and mixt's from PEFT's equal (difference 0); so the
// training test allows no difference, the logits tests 1e-5 of the largest logit. DoRA the
// same (18 tensors), and both merged exports equal PEFT's merged weights bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "adapter_recipes.h"
#include "assembly/adapters.h"
#include "assembly/components.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_weights.h"
#include "experiment/model_source.h"
#include "mixt/autocast.h"
#include "mixt/helpers/linear.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/precision.h"
#include "plugins.h"
#include "ranks.h"
#include "recipe/recipe_loader.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

const fs::path kGolden = testing::configured::lora_golden_dir();
const fs::path kSource = testing::source_dir();

// A variant's references: lora's in the fixture's folder, dora's in its dora/.
fs::path references(const std::string& variant) { return variant == "dora" ? kGolden / "dora" : kGolden; }

nlohmann::json golden(const std::string& variant = "lora") {
  return nlohmann::json::parse(testing::read_file(references(variant) / "training.json"));
}

using testing::quoted;

// The reference loop's recipe: its sections as it wrote them, over the fixture's folders.
std::string recipe(const std::string& adapter, const std::string& trainer = "") {
  return testing::reference_loop_recipe(kGolden, "lora", adapter, trainer);
}

std::string from_init(const std::string& variant = "lora") {
  return "{ from: " + quoted(references(variant) / "init_adapter") + " }";
}

std::map<std::string, at::Tensor> by_name(const fs::path& file) {
  const NamedTensors tensors = load_safetensors(file).tensors;
  return {tensors.begin(), tensors.end()};
}

// `python3 make_lora_golden.py COMMAND FIXTURE DIR [dora]`, which prints "agree" when it does.
void expect_python_agrees(const std::string& command, const fs::path& dir, const std::string& variant) {
  const CommandResult check = testing::run_command(
      std::string(MIXT_PYTHON) + " " + testing::shell_quote((kSource / "tests/golden/make_lora_golden.py").string()) +
      " " + command + " " + testing::shell_quote(kGolden.string()) + " " + testing::shell_quote(dir.string()) +
      (variant == "dora" ? " dora" : ""));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("agree"));
  std::cout << "[ measured ] " << variant << " " << command << ": " << check.output;
}

// `mixt export RUN --format transformers`: PEFT's merge_and_unload() weights under their
// names, bit for bit, and model.from's config.json; transformers loads the folder.
void expect_merged_export_equals_pefts(const fs::path& run_dir, const std::string& variant, const fs::path& cwd) {
  const fs::path out = cwd / ("merged_" + variant);
  const CommandResult exported =
      run_mixt({"export", run_dir.string(), "--format", "transformers", "-o", out.string()}, cwd);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("the adapter merged into the base weights"));
  auto merged = by_name(out / "model.safetensors");
  auto reference = by_name(references(variant) / "merged" / "model.safetensors");
  EXPECT_EQ(merged.size(), reference.size());
  double largest = 0;
  for (const auto& [name, tensor] : reference) {
    ASSERT_TRUE(merged.count(name)) << name << " is not in mixt's merged export";
    EXPECT_TRUE(at::equal(merged[name], tensor)) << name;
    largest = std::max(largest, (merged[name] - tensor).abs().max().item<double>());
  }
  std::cout << "[ measured ] " << variant << " merged export: " << merged.size()
            << " tensors, largest difference from PEFT's merge_and_unload() " << largest << "\n";
  EXPECT_EQ(testing::read_file(out / "config.json"), testing::read_file(kGolden / "base" / "config.json"));
  expect_python_agrees("check-merged", out, variant);
}

// DoRA and LoRA, with activation checkpointing too: the adapted layers are recomputed in the
// backward pass, bitwise the same training.
class LoraTraining : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(LoraTraining, TwentyAdamWStepsEqualPeftOverTransformers) {
  const auto& [variant, checkpointing] = GetParam();
  const nlohmann::json g = golden(variant);
  TempDir dir;
  dir.write("lora.yaml",
            recipe(from_init(variant), checkpointing == "checkpointed" ? "activation_checkpointing: all, " : ""));
  const CommandResult run = run_mixt({"run", "lora.yaml"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "lora");
  ASSERT_FALSE(run_dir.empty());

  std::vector<double> losses, grad_norms;
  std::istringstream lines(testing::read_file(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] != "step") continue;
    losses.push_back(event["loss"].get<double>());
    grad_norms.push_back(event["grad_norm"].get<double>());
  }
  const auto expected_losses = g["losses"].get<std::vector<double>>();
  ASSERT_EQ(expected_losses.size(), static_cast<std::size_t>(g["steps"].get<int>()));
  EXPECT_EQ(losses, expected_losses);
  EXPECT_EQ(grad_norms, g["grad_norms"].get<std::vector<double>>());

  // The run's adapter folder: PEFT's names and PEFT's final values.
  const NamedTensors trained = load_safetensors(run_dir / "adapter" / "adapter_model.safetensors").tensors;
  auto reference = by_name(references(variant) / "final_adapter" / "adapter_model.safetensors");
  ASSERT_EQ(trained.size(), reference.size());
  double largest = 0;
  for (const auto& [name, tensor] : trained) {
    ASSERT_TRUE(reference.count(name)) << name << " is not in PEFT's adapter";
    EXPECT_TRUE(at::equal(tensor, reference[name])) << name;
    largest = std::max(largest, (tensor - reference[name]).abs().max().item<double>());
  }
  std::cout << "[ measured ] " << variant << ": " << trained.size()
            << " adapter tensors, largest difference from PEFT's " << largest << "\n";
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(run_dir / "adapter" / "adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["use_dora"], variant == "dora");
  EXPECT_EQ(config["r"], g["adapter"]["rank"]);
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");

  // PEFT reads it.
  expect_python_agrees("check", run_dir / "adapter", variant);
  if (checkpointing == "plain") expect_merged_export_equals_pefts(run_dir, variant, dir.path());
}

INSTANTIATE_TEST_SUITE_P(Runs, LoraTraining,
                         ::testing::Combine(::testing::Values("lora", "dora"),
                                            ::testing::Values("plain", "checkpointed")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

at::Tensor find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& item : tensors) {
    if (item.first == name) return item.second;
  }
  throw std::runtime_error("no tensor " + name);
}

// The final adapter tensors of a run's adapter folder, by name.
std::map<std::string, at::Tensor> adapter_of(const fs::path& run_dir) {
  const NamedTensors tensors = load_safetensors(run_dir / "adapter" / "adapter_model.safetensors").tensors;
  return {tensors.begin(), tensors.end()};
}

// A run with an adapter checkpoints the adapter and the buffers, not the frozen base (which
// model.from gives back), and resuming from such a checkpoint continues bit for bit: 2
// epochs of 10 steps, run through and run as 1 + a resumed 1, end with the same adapter.
TEST(LoraCheckpoints, HoldOnlyTheAdapterAndResumeBitForBit) {
  TempDir dir;
  dir.write("lora.yaml", recipe(from_init(), "max_steps_per_epoch: 10, "));
  const CommandResult whole = run_mixt({"run", "lora.yaml", "trainer.epochs=2", "output=whole"}, dir.path());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const CommandResult first = run_mixt({"run", "lora.yaml", "output=parts"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path part = testing::only_run_directory(dir.path() / "parts" / "lora");
  ASSERT_FALSE(part.empty());

  const fs::path checkpoint = part / "checkpoints" / "epoch-0001";
  CheckpointContents contents = read_checkpoint(checkpoint);
  EXPECT_TRUE(omits_frozen_base(contents));
  torch::serialize::InputArchive model_state;
  contents.archive.read("model", model_state);
  std::size_t adapter_tensors = 0;
  for (const auto& [name, tensor] : flatten_archive(model_state)) {
    const bool adapter = name.find(".lora_") != std::string::npos;
    adapter_tensors += adapter ? 1 : 0;
    EXPECT_TRUE(adapter || name.ends_with("inv_freq")) << name << " is in the checkpoint";  // llama's one buffer
  }
  EXPECT_EQ(adapter_tensors, 12u);
  const auto base_bytes = static_cast<std::int64_t>(fs::file_size(kGolden / "base" / "model.safetensors"));
  std::cout << "[ measured ] checkpoint " << fs::file_size(checkpoint) << " bytes, the base's safetensors "
            << base_bytes << " bytes\n";
  EXPECT_LT(static_cast<std::int64_t>(fs::file_size(checkpoint)), base_bytes);

  const CommandResult resumed =
      run_mixt({"run", "lora.yaml", "trainer.epochs=2", "trainer.resume=" + part.string(), "output=parts"}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const fs::path through = testing::only_run_directory(dir.path() / "whole" / "lora");
  fs::path continued;
  for (const auto& entry : fs::directory_iterator(dir.path() / "parts" / "lora")) {
    if (entry.path() != part) continued = entry.path();
  }
  ASSERT_FALSE(continued.empty()) << "the resumed run made no run directory of its own";
  auto expected = adapter_of(through);
  for (const auto& [name, tensor] : adapter_of(continued)) {
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_TRUE(at::equal(tensor, expected[name])) << name;
  }

  // The inference path (evaluate, predict, generate) reads the checkpoint over model.from's
  // base: the adapted model's weights are the run's.
  const RecipeNodePtr root = parse_yaml(testing::read_file(part / "recipe.yaml"), "recipe.yaml");
  const Config built(root, "");
  const auto model = build_model(built.section("model"), plugins().registry, ModelContext{});
  [[maybe_unused]] const auto adapter =
      apply_adapter(built.section("adapter"), plugins().registry, *model, AdapterContext{});
  load_checkpoint_weights(*model, at::kCPU, checkpoint, /*ema=*/false);
  const auto saved = adapter_of(part);
  for (const auto& [name, tensor] : peft_tensors(*model)) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_TRUE(at::equal(tensor, saved.at(name))) << name;
  }

  // `mixt export` of such a checkpoint says where the adapter is rather than writing half a model.
  const CommandResult exported = run_mixt({"export", part.string(), "-o", "model.safetensors"}, dir.path());
  EXPECT_EQ(exported.exit_code, 2) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("adapter/ folder"));
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));
}

// Data parallel on 2 Gloo ranks: only the adapter's gradients are reduced (the base has
// none), and every sharding mode trains as the replicated run, bit for bit; the replicated
// run is one process's training but for the order of the gradients' sums.
TEST(LoraDataParallel, TwoRanksTrainAsOneProcessInEveryShardingMode) {
  TempDir dir;
  dir.write("r.yaml", recipe(from_init(), "max_steps_per_epoch: 6, distributed: { backend: gloo, timeout: 60 }, "));
  const CommandResult single = run_mixt({"run", "r.yaml", "output=single"}, dir.path());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto expected = adapter_of(testing::only_run_directory(dir.path() / "single" / "lora"));
  std::map<std::string, std::map<std::string, at::Tensor>> adapters;
  for (const std::string mode : {"none", "optimizer", "gradients", "parameters"}) {
    const auto ranks = testing::run_ranks(
        dir, 2, {{"output=" + mode, "data.train.batch_size=2", "trainer.distributed.sharding=" + mode}});
    for (const auto& rank : ranks) ASSERT_EQ(rank.exit_code, 0) << mode << "\n" << rank.log;
    adapters[mode] = adapter_of(testing::only_run_directory(dir.path() / mode / "lora"));
  }
  double replicated = 0;
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(adapters["none"].count(name)) << name;
    replicated = std::max(replicated, (adapters["none"][name] - tensor).abs().max().item<double>());
  }
  std::cout << "[ measured ] 2 ranks vs one process: largest adapter difference " << replicated << "\n";
  EXPECT_LT(replicated, 1e-5);  // 4.6e-7 measured
  for (const std::string mode : {"optimizer", "gradients", "parameters"}) {
    for (const auto& [name, tensor] : adapters["none"])
      EXPECT_TRUE(at::equal(adapters[mode].at(name), tensor)) << mode << " " << name;
  }
}

class LoraAdapter : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraAdapter, MixtReadsPeftsAdapterFolderWithPeftsLogits) {
  const std::string variant = GetParam();
  const NamedTensors io = load_safetensors(references(variant) / "io.safetensors").tensors;
  for (const std::string which : {"init", "final"}) {
    const RecipeNodePtr root =
        parse_yaml("model: {name: llama, from: " + quoted(kGolden / "base") +
                       "}\nadapter: {from: " + quoted(references(variant) / (which + "_adapter")) + "}",
                   "test");
    const Config recipe(root, "");
    const auto model = build_model(recipe.section("model"), plugins().registry, ModelContext{});
    [[maybe_unused]] const auto adapter =
        apply_adapter(recipe.section("adapter"), plugins().registry, *model, AdapterContext{});
    model->eval();
    at::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(find(io, "ids"));
    const at::Tensor expected = find(io, which + "_logits");
    const double diff = (logits - expected).abs().max().item<double>();
    std::cout << "[ measured ] " << which << " adapter: max |logits - PEFT's| = " << diff << " (max |logit| "
              << expected.abs().max().item<double>() << ")\n";
    EXPECT_LE(diff, 1e-5 * expected.abs().max().item<double>()) << which;
    // Only the adapter trains.
    for (const auto& item : model->named_parameters()) {
      EXPECT_EQ(item.value().requires_grad(), item.key().find(".lora_") != std::string::npos) << item.key();
    }
    // 2 layers, 3 targets, A and B (and dora's magnitude)
    EXPECT_EQ(peft_tensors(*model).size(), variant == "dora" ? 18u : 12u);
    EXPECT_EQ(recipe.section("adapter").string("name"), variant);  // use_dora chose dora
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LoraAdapter, ::testing::Values("lora", "dora"));

// A fresh dora (no `from`) starts as PEFT's does: lora_magnitude_vector the base weight's row
// norms (the initial folder's, bit for bit, lora_B being zero then), and the model computes
// exactly what the base computes.
TEST(DoraAdapter, StartsFromTheBaseWeightsRowNormsAsPeftDoes) {
  const RecipeNodePtr root = parse_yaml("model: {name: llama, from: " + quoted(kGolden / "base") +
                                            "}\nadapter: {name: dora, rank: 4, alpha: 8, targets: [q_proj, v_proj, "
                                            "mlp.down_proj]}",
                                        "test");
  const Config recipe(root, "");
  const auto model = build_model(recipe.section("model"), plugins().registry, ModelContext{});
  const at::Tensor ids = find(load_safetensors(kGolden / "io.safetensors").tensors, "ids");
  at::NoGradGuard no_grad;
  const at::Tensor before = model->forward(ids);
  [[maybe_unused]] const auto adapter =
      apply_adapter(recipe.section("adapter"), plugins().registry, *model, AdapterContext{});
  auto initial = by_name(kGolden / "dora" / "init_adapter" / "adapter_model.safetensors");
  int magnitudes = 0;
  for (const auto& [name, tensor] : peft_tensors(*model)) {
    if (!name.ends_with(".lora_magnitude_vector")) continue;
    ASSERT_TRUE(initial.count(name)) << name << " is not in PEFT's initial adapter";
    EXPECT_TRUE(at::equal(tensor, initial[name])) << name;
    ++magnitudes;
  }
  EXPECT_EQ(magnitudes, 6);
  EXPECT_TRUE(at::equal(model->forward(ids), before));
}

// The SDK's default: an adapter without MergesIntoBase is refused by name, a usage error.
TEST(LoraAdapterMerge, AnAdapterThatCannotMergeIsRefusedByName) {
  struct Unmergeable : Adapter {
    void apply(torch::nn::Module&) override {}
    std::string peft_config() const override { return "{}"; }
  } adapter;
  torch::nn::Module model;
  try {
    merge_adapter(adapter, "mine", model);
    FAIL() << "merged";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_THAT(e.message(), HasSubstr("the adapter 'mine' cannot merge into the base weights"));
  }
}

// A float8 policy installs its LinearFunction on the linear layers first: the adapter wraps
// it. With lora_B zero (a fresh adapter) the model computes exactly what it computed before
// (the float8 products, not at::linear's bfloat16 ones), and the layers it did not target
// keep the policy's function.
TEST(LoraComposes, WrapsAFloat8PolicysLinearFunction) {
  const RecipeNodePtr root =
      parse_yaml("model: {name: llama, from: " + quoted(kGolden / "base") +
                     "}\nprecision: {name: fp8_tensorwise}\nadapter: {name: lora, rank: 4, targets: [q_proj, v_proj]}",
                 "test");
  const Config recipe(root, "");
  const auto model = build_model(recipe.section("model"), plugins().registry, ModelContext{});
  const auto policy = plugins().registry.make_precision(recipe.section("precision"), PrecisionContext{});
  policy->setup(*model, at::kCPU);
  std::map<std::string, const LinearFunction*> installed;
  for (const LinearLayer& layer : linear_layers(*model)) {
    installed[layer.name] = layer.owner->linear_function(layer.map).get();
  }
  ASSERT_NE(installed["model.layers.1.self_attn.q_proj"], nullptr) << "fp8_tensorwise took no layer";  // not the first
  const at::Tensor ids = find(load_safetensors(kGolden / "io.safetensors").tensors, "ids");
  at::NoGradGuard no_grad;
  const auto forward = [&] {
    const AutocastScope scope = policy->autocast(at::kCPU);
    return model->forward(ids);
  };
  const at::Tensor before = forward();
  [[maybe_unused]] const auto adapter =
      apply_adapter(recipe.section("adapter"), plugins().registry, *model, AdapterContext{});
  EXPECT_TRUE(at::equal(forward(), before));
  for (const LinearLayer& layer : linear_layers(*model)) {
    const bool target = layer.name.ends_with("q_proj") || layer.name.ends_with("v_proj");
    EXPECT_EQ(layer.owner->linear_function(layer.map).get() == installed[layer.name], !target) << layer.name;
  }
}

// `mixt check` on the parity recipe with one change: exit 2 and the output.
CommandResult check_with(const std::string& adapter, TempDir& dir) {
  dir.write("lora.yaml", recipe(adapter));
  return run_mixt({"check", "lora.yaml"}, dir.path());
}

TEST(LoraBadInput, ATargetThatMatchesNothingListsTheLinearLayers) {
  TempDir dir;
  const CommandResult r = check_with("{ name: lora, rank: 4, targets: [q_proj, qkv] }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.targets"));
  EXPECT_THAT(r.output, HasSubstr("'qkv' matches none of the model's linear layers"));
  EXPECT_THAT(r.output, HasSubstr("model.layers.1.mlp.down_proj"));
}

TEST(LoraBadInput, ARankAboveALayersSizeIsARecipeError) {
  TempDir dir;
  const CommandResult r = check_with("{ name: lora, rank: 48, targets: [v_proj] }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.rank"));
  EXPECT_THAT(r.output, HasSubstr("rank 48 is above the size of 'model.layers.0.self_attn.v_proj' (64 in, 32 out)"));
}

// A number beyond a double's range is nlohmann's out_of_range, not its parse_error.
TEST(LoraBadInput, AnAdapterConfigThatIsNotJsonIsARecipeError) {
  TempDir dir;
  fs::create_directories(dir.path() / "other");
  fs::copy_file(kGolden / "init_adapter" / "adapter_model.safetensors",
                dir.path() / "other" / "adapter_model.safetensors");
  dir.write("other/adapter_config.json", "{\"r\": 1e400}");
  const CommandResult r = check_with("{ from: " + quoted(dir.path() / "other") + " }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.from"));
  EXPECT_THAT(r.output, HasSubstr("adapter_config.json is not valid JSON"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("terminate")));
}

TEST(LoraBadInput, AnAdapterOfAnotherBaseNamesTheTensor) {
  TempDir dir;
  fs::create_directories(dir.path() / "other");
  fs::copy_file(kGolden / "init_adapter" / "adapter_config.json", dir.path() / "other" / "adapter_config.json");
  NamedTensors tensors = load_safetensors(kGolden / "init_adapter" / "adapter_model.safetensors").tensors;
  const std::string changed = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight";
  for (auto& [name, tensor] : tensors) {
    if (name == changed) tensor = at::zeros({48, tensor.size(1)});  // a base with wider v_proj
  }
  save_safetensors(dir.path() / "other" / "adapter_model.safetensors", tensors);
  const CommandResult r = check_with("{ from: " + quoted(dir.path() / "other") + " }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.from"));
  EXPECT_THAT(r.output, HasSubstr(changed + " is [48, 4], this model's is [32, 4]"));
  // And the recipe's own options must agree with the folder's.
  const CommandResult disagree = check_with("{ from: " + quoted(kGolden / "init_adapter") + ", rank: 8 }", dir);
  EXPECT_EQ(disagree.exit_code, 2) << disagree.output;
  EXPECT_THAT(disagree.output, HasSubstr("adapter.rank disagrees with"));
}

TEST(LoraBadInput, ADoraFolderOfAnotherBaseNamesTheMagnitude) {
  TempDir dir;
  const fs::path init = kGolden / "dora" / "init_adapter";
  fs::create_directories(dir.path() / "other");
  fs::copy_file(init / "adapter_config.json", dir.path() / "other" / "adapter_config.json");
  NamedTensors tensors = load_safetensors(init / "adapter_model.safetensors").tensors;
  const std::string changed = "base_model.model.model.layers.0.mlp.down_proj.lora_magnitude_vector";
  for (auto& [name, tensor] : tensors) {
    if (name == changed) tensor = at::ones({48});  // a base with a wider hidden size
  }
  save_safetensors(dir.path() / "other" / "adapter_model.safetensors", tensors);
  const CommandResult r = check_with("{ from: " + quoted(dir.path() / "other") + " }", dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("adapter.from"));
  EXPECT_THAT(r.output, HasSubstr(changed + " is [48], this model's is [64]"));
  // A DoRA folder is dora's: a recipe that names lora disagrees.
  const CommandResult named = check_with("{ name: lora, from: " + quoted(init) + " }", dir);
  EXPECT_EQ(named.exit_code, 2) << named.output;
  EXPECT_THAT(named.output, HasSubstr("adapter.name disagrees with"));
  EXPECT_THAT(named.output, HasSubstr("key use_dora"));
}

TEST(LoraBadInput, MergingWithoutAnAdapterOrOverAFolderWritesNothing) {
  TempDir dir;
  dir.write("plain.yaml", recipe(""));
  const CommandResult r = run_mixt({"export", "plain.yaml", "--merge-adapter", "-o", "merged.safetensors"}, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--merge-adapter: plain.yaml's recipe has no adapter to merge"));
  EXPECT_FALSE(fs::exists(dir.path() / "merged.safetensors"));
  const CommandResult onnx = run_mixt({"export", "plain.yaml", "--merge-adapter", "-o", "model.onnx"}, dir.path());
  EXPECT_EQ(onnx.exit_code, 2) << onnx.output;
  EXPECT_THAT(onnx.output, HasSubstr("--merge-adapter: plain.yaml's recipe has no adapter to merge"));
  // A transformers export does not write into a folder that holds files.
  dir.write("lora.yaml", recipe(from_init()));
  dir.write("out/keep.txt", "mine");
  const CommandResult over = run_mixt({"export", "lora.yaml", "--format", "transformers", "-o", "out"}, dir.path());
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_THAT(over.output, HasSubstr("-o out exists: --format transformers writes a new folder"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() / "out"), fs::directory_iterator{}), 1);
}

TEST(LoraRecipe, TrainsOnATransformersFolderAndWritesPeftFiles) {
  TempDir dir;
  const fs::path checkpoint = dir.path() / "checkpoint";
  const CommandResult made = testing::run_command(
      std::string(MIXT_PYTHON) + " " + testing::shell_quote((kSource / "tests/support/llama_checkpoint.py").string()) +
      " " + testing::shell_quote((kSource / "recipes/llama/gpl3_bpe512.json").string()) + " " +
      testing::shell_quote(checkpoint.string()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const CommandResult run =
      run_mixt({"run", (kSource / "recipes/llama/lora.yaml").string(), "model.from=" + checkpoint.string(),
                "trainer.max_steps_per_epoch=3", "output=" + (dir.path() / "runs").string()},
               dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, ::testing::ContainsRegex("adapter lora: [0-9]+ trainable parameters of [0-9]+"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "llama_lora");
  ASSERT_FALSE(run_dir.empty());
  // The commands that build the recipe's model alone build its adapter too, for the
  // checkpoint's adapter tensors.
  for (const char* file : {"model.onnx", "model.pt"}) {
    const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    const CommandResult merged =
        run_mixt({"export", run_dir.string(), "--merge-adapter", "-o", std::string("merged_") + file}, dir.path());
    ASSERT_EQ(merged.exit_code, 0) << merged.output;
  }
  // Merged, each adapted layer is one weight: the same outputs within float rounding, no
  // adapter tensors, and the targets' weights (2 layers' q_proj and v_proj) no longer the base's.
  const CommandResult checked =
      testing::run_command("cd " + testing::shell_quote(dir.path().string()) + " && " + std::string(MIXT_PYTHON) + " " +
                           testing::shell_quote((kSource / "tests/support/merged_export_check.py").string()) + " " +
                           testing::shell_quote((checkpoint / "model.safetensors").string()) +
                           " model.onnx merged_model.onnx model.pt" + " merged_model.pt");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  // The script's JSON is its last line (ONNX Runtime may warn before it).
  const std::size_t last_line = checked.output.rfind("\n{");
  const nlohmann::json m =
      nlohmann::json::parse(last_line == std::string::npos ? checked.output : checked.output.substr(last_line + 1));
  const double tolerance = 1e-5 * std::max(1.0, m["max_abs"].get<double>());
  EXPECT_LE(m["onnx_max_diff"].get<double>(), tolerance) << checked.output;
  EXPECT_LE(m["torchscript_max_diff"].get<double>(), tolerance) << checked.output;
  EXPECT_FALSE(m["adapter_tensors"]["model.onnx"].empty()) << checked.output;
  EXPECT_TRUE(m["adapter_tensors"]["merged_model.onnx"].empty()) << checked.output;
  EXPECT_FALSE(m["adapter_tensors"]["model.pt"].empty()) << checked.output;
  EXPECT_TRUE(m["adapter_tensors"]["merged_model.pt"].empty()) << checked.output;
  EXPECT_TRUE(m["changed_from_base"]["model.onnx"].empty()) << checked.output;
  EXPECT_EQ(m["changed_from_base"]["merged_model.onnx"].size(), 4U) << checked.output;
  std::cout << "[ measured ] merged vs unmerged export: ONNX Runtime " << m["onnx_max_diff"] << ", torch.jit.load "
            << m["torchscript_max_diff"] << " (outputs up to " << m["max_abs"] << ")\n";
  EXPECT_TRUE(fs::exists(run_dir / "adapter" / "adapter_model.safetensors"));
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(run_dir / "adapter" / "adapter_config.json"));
  EXPECT_EQ(config["r"], 16);
  EXPECT_EQ(config["lora_alpha"], 32);
  EXPECT_EQ(config["base_model_name_or_path"], checkpoint.string());
}

}  // namespace
}  // namespace mixt
