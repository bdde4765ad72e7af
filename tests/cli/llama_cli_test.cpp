// recipes/llama end to end:
//  - gpl3.yaml (a small Llama on the GPL-3 in a BPE of 512 tokens, the fused loss) trains a
//    few steps from the source tree, and `mixt generate --prompt` continues text with it;
//  - its run exported to ONNX (opsets 17 and 21), TorchScript and safetensors: ONNX Runtime
//    and torch.jit.load give transformers' LlamaForCausalLM's logits (on mixt's safetensors)
//    within 1e-4 at batches 1 and 3, at lengths 1, 17 and the whole context
//    (tests/support/export_reference.py measures);
//  - finetune.yaml starts from a transformers folder (tests/support/llama_checkpoint.py
//    writes one with the recipe tokenizer's vocabulary) and trains under amp_bf16 with the
//    head in float32 and every layer recomputed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "export_checks.h"
#include "mixt/helpers/safetensors.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const fs::path kSource = testing::source_dir();

class LlamaRecipes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    // From the source tree: the recipe's tokenizer path is relative to where mixt runs.
    const CommandResult run =
        run_mixt({"run", "recipes/llama/gpl3.yaml", "output=" + (dir_->path() / "runs").string(), "trainer.epochs=1",
                  "trainer.max_steps_per_epoch=8", "callbacks=[]", "scheduler.warmup_epochs=0.2"},
                 kSource);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    run_ = new fs::path(testing::only_run_directory(dir_->path() / "runs" / "llama_gpl3"));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete dir_;
  }
  static TempDir* dir_;
  static fs::path* run_;
};
TempDir* LlamaRecipes::dir_ = nullptr;
fs::path* LlamaRecipes::run_ = nullptr;

TEST_F(LlamaRecipes, Gpl3TrainsAndGeneratesText) {
  ASSERT_FALSE(run_->empty());
  const CommandResult generated = run_mixt(
      {"generate", run_->string(), "--prompt", "The licensees", "--max-new-tokens", "20", "--top-k", "20"}, kSource);
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_THAT(generated.output, HasSubstr("The licensees"));
  EXPECT_GT(generated.output.size(), std::string("The licensees\n").size());
}

TEST_F(LlamaRecipes, ExportsToOnnxAndTorchScriptThatGiveTransformersLogits) {
  const fs::path dir = dir_->path() / "export";
  fs::create_directories(dir);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-o", (dir / "m.onnx").string()},
                                             {"-o", (dir / "m21.onnx").string(), "--opset", "21"},
                                             {"-o", (dir / "m.pt").string()},
                                             {"-o", (dir / "m.safetensors").string()}}) {
    std::vector<std::string> command{"export", run_->string()};
    command.insert(command.end(), args.begin(), args.end());
    const CommandResult exported = run_mixt(command, kSource);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
  }
  const nlohmann::json llama = {{"vocab_size", 512}, {"context_length", 128},  {"num_layers", 4},
                                {"num_heads", 4},    {"num_kv_heads", 2},      {"hidden_dim", 128},
                                {"mlp_dim", 352},    {"rope_theta", 100000.0}, {"tie_embeddings", true}};
  // Lengths 1 and 17 (batches 1 and 3), then the whole context at both.
  const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> sets{{{1, 1}, {3, 17}}, {{1, 128}, {3, 128}}};
  nlohmann::json manifest = nlohmann::json::array();
  at::manual_seed(5);
  for (std::size_t s = 0; s < sets.size(); ++s) {
    NamedTensors data;
    for (const auto& [batch, time] : sets[s]) {
      data.emplace_back("input_b" + std::to_string(batch), at::randint(0, 512, {batch, time}, at::kLong));
    }
    const fs::path file = dir / ("data" + std::to_string(s) + ".safetensors");
    save_safetensors(file, data);
    for (const char* opset : {"17", "21"}) {
      nlohmann::json c = {{"name", "lengths" + std::to_string(s) + "_opset" + opset},
                          {"data", file.string()},
                          {"batches", {1, 3}},
                          {"onnx", (dir / (std::string(opset) == "17" ? "m.onnx" : "m21.onnx")).string()},
                          {"safetensors", (dir / "m.safetensors").string()},
                          {"transformers_llama", llama}};
      if (std::string(opset) == "17") c["torchscript"] = (dir / "m.pt").string();
      manifest.push_back(c);
    }
  }
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const nlohmann::json results = testing::run_export_reference(dir / "manifest.json");
  for (const auto& c : manifest) {
    const std::string name = c["name"];
    const nlohmann::json& r = results.at(name);
    const double tolerance = 1e-4 * std::max(1.0, r.value("expected_max_abs", 1.0));
    ASSERT_NO_FATAL_FAILURE(testing::expect_onnx_within(results, name, tolerance));
    EXPECT_EQ(r["initializers_mismatched"], nlohmann::json::array()) << name;
    if (c.contains("torchscript")) {
      ASSERT_TRUE(r["torchscript_max_diff"].is_number()) << name << ": " << r["torchscript_max_diff"];
      EXPECT_LE(r["torchscript_max_diff"].get<double>(), tolerance) << name;
    }
    std::cout << "[ measured ] llama export " << name << ": logits up to " << r["expected_max_abs"] << "; ONNX Runtime "
              << r["onnx_max_diff"] << ", torch.jit.load " << r.value("torchscript_max_diff", 0.0)
              << " from transformers\n";
  }
}

TEST(LlamaFinetuneRecipe, TrainsFromATransformersFolder) {
  TempDir dir;
  const fs::path checkpoint = dir.path() / "checkpoint";
  const CommandResult made = testing::run_command(
      std::string(MIXT_PYTHON) + " " + testing::shell_quote((kSource / "tests/support/llama_checkpoint.py").string()) +
      " " + testing::shell_quote((kSource / "recipes/llama/gpl3_bpe512.json").string()) + " " +
      testing::shell_quote(checkpoint.string()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  // Nothing but the folder: it implies the task and encodes the text with its tokenizer.
  const CommandResult run =
      run_mixt({"run", (kSource / "recipes/llama/finetune.yaml").string(), "model.from=" + checkpoint.string(),
                "trainer.max_steps_per_epoch=3", "callbacks=[]", "output=" + (dir.path() / "runs").string()},
               dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The text in the folder's 512 tokens, not as bytes (vocabulary 256).
  const CommandResult checked = run_mixt(
      {"check", (kSource / "recipes/llama/finetune.yaml").string(), "model.from=" + checkpoint.string()}, dir.path());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, ::testing::ContainsRegex("data.train +[0-9]+ samples, vocabulary 512,"));
  EXPECT_THAT(checked.output, HasSubstr("task      causal_lm"));
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "llama_finetune");
  ASSERT_FALSE(run_dir.empty());
  EXPECT_TRUE(fs::exists(run_dir / "metrics.jsonl"));
}

}  // namespace
}  // namespace mixt
