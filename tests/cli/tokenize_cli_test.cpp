// `mixt tokenize` against Hugging Face `tokenizers`: the shards, read as llm.c reads them,
// hold tokenizers' ids for the same documents (tests/support/llmc_shards_check.py), the same
// bytes for 1 and 4 threads, uint32 ids past a vocabulary of 65,536, and train a gpt2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include "json_output.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::TempDir;
namespace fs = std::filesystem;

const char* const kGpl = "/usr/share/common-licenses/GPL-3";

class TokenizeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizers_ = new TempDir;
    const CommandResult made = testing::run_command(
        "python3 " + testing::shell_quote((testing::source_dir() / "tests/support/tokenizer_reference.py").string()) +
        " --wide " + testing::shell_quote(tokenizers_->path().string()));
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { delete tokenizers_; }

  static std::string tokenizer(const std::string& family) {
    return (tokenizers_->path() / family / "tokenizer.json").string();
  }

  // llmc_shards_check.py's verdict on the shards in `out` for `inputs`.
  static nlohmann::json check(const std::string& family, const fs::path& out, const std::vector<std::string>& inputs,
                              const std::string& extra = "") {
    std::string command = "python3 " +
                          testing::shell_quote((testing::source_dir() / "tests/support/llmc_shards_check.py").string()) +
                          " --tokenizer " + testing::shell_quote(tokenizer(family)) + " --out " +
                          testing::shell_quote(out.string()) + " " + extra;
    for (const auto& input : inputs) command.append(" ").append(testing::shell_quote(input));
    const CommandResult checked = testing::run_command(command);
    EXPECT_EQ(checked.exit_code, 0) << checked.output;
    return testing::json_document(checked.output);
  }

  static std::string bytes_of_all(const fs::path& out) {
    std::string all;
    for (const char* name : {"train_000000.bin", "train_000001.bin", "train_000002.bin", "val_000000.bin"}) {
      if (fs::exists(out / name)) all += testing::read_file(out / name);
    }
    return all;
  }

  TempDir dir_;
  static TempDir* tokenizers_;
};
TempDir* TokenizeCli::tokenizers_ = nullptr;

TEST_F(TokenizeCli, GplEqualsTokenizersIdsForOneAndFourThreads) {
  for (const char* threads : {"1", "4"}) {
    const fs::path out = dir_.path() / (std::string("threads") + threads);
    const CommandResult r = testing::run_mixt(
        {"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", out.string(), "--threads", threads});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("tokenized 1 document"));
    EXPECT_THAT(r.output, HasSubstr("tokens/s"));
    const nlohmann::json verdict = check("gpt2_style", out, {kGpl});
    EXPECT_TRUE(verdict["ok"].get<bool>()) << verdict.dump();
    EXPECT_EQ(verdict["width"], 2);
    // nanoGPT's split: the last tenth of the stream is val.
    EXPECT_NEAR(verdict["val_tokens"].get<double>(), 0.1 * verdict["tokens"].get<double>(), 1.0);
  }
  EXPECT_EQ(bytes_of_all(dir_.path() / "threads1"), bytes_of_all(dir_.path() / "threads4"));
}

// Paragraphs of GPL-3 and lines of the many-script corpus as JSONL records: many documents,
// spread over the threads, in three train shards.
TEST_F(TokenizeCli, JsonlDocumentsComeOutInOrderWhateverTheThreads) {
  std::string jsonl;
  const std::string gpl = testing::read_file(kGpl);
  for (std::size_t at = 0; at < gpl.size();) {
    const std::size_t end = std::min(gpl.find("\n\n", at), gpl.size());
    jsonl += nlohmann::json{{"id", at}, {"text", gpl.substr(at, end - at)}}.dump() + "\n";
    at = end + 2;
  }
  std::istringstream corpus(testing::read_file(testing::source_dir() / "tests/fixtures/text/tokenizer_corpus.txt"));
  for (std::string line; std::getline(corpus, line);) jsonl += nlohmann::json{{"text", line}}.dump() + "\n";
  const fs::path input = dir_.write("docs.jsonl", jsonl);
  for (const char* threads : {"1", "4"}) {
    const fs::path out = dir_.path() / (std::string("jsonl") + threads);
    const CommandResult r =
        testing::run_mixt({"tokenize", input.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", out.string(),
                           "--threads", threads, "--shard-tokens", "4000", "--val-fraction", "0.05"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(out / "train_000002.bin")) << r.output;
    const nlohmann::json verdict = check("gpt2_style", out, {input.string()});
    EXPECT_TRUE(verdict["ok"].get<bool>()) << verdict.dump();
  }
  EXPECT_EQ(bytes_of_all(dir_.path() / "jsonl1"), bytes_of_all(dir_.path() / "jsonl4"));
}

TEST_F(TokenizeCli, AVocabularyPastUint16WritesLlmcUint32Shards) {
  const fs::path input = dir_.write("wide.txt", "ids past 65,535: <extra_69999> and <extra_5>, then text.\n");
  const fs::path out = dir_.path() / "wide";
  const CommandResult r = testing::run_mixt({"tokenize", input.string(), kGpl, "--tokenizer", tokenizer("llama3_wide"),
                                             "--out", out.string(), "--separator", "<|end_of_text|>"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("uint32 ids"));
  const nlohmann::json verdict =
      check("llama3_wide", out, {input.string(), kGpl}, "--separator '<|end_of_text|>'");
  EXPECT_TRUE(verdict["ok"].get<bool>()) << verdict.dump();
  EXPECT_EQ(verdict["width"], 4);
}

TEST_F(TokenizeCli, ItsShardsTrainAGpt2) {
  const fs::path out = dir_.path() / "gpl";
  ASSERT_EQ(testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", out.string()})
                .exit_code,
            0);
  dir_.write("lm.yaml", R"(name: lm
task: { name: causal_lm }
model: { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 64, context_length: 32, dropout: 0, attention_dropout: 0 }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 3.0e-3 }
data:
  train: { name: tokens, files: [)" + (out / "train_000000.bin").string() +
                            R"(], vocab: 1200, context: 32, batch_size: 16 }
  val:   { name: tokens, files: [)" + (out / "val_000000.bin").string() +
                            R"(], vocab: 1200, context: 32, batch_size: 16 }
trainer: { epochs: 8, seed: 0, threads: 1 }
output: runs
)");
  const CommandResult run = testing::run_mixt({"run", "lm.yaml"}, dir_.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Guessing uniformly among 1200 tokens costs ln(1200) = 7.09 nats; 8 short epochs reach ~5.7.
  std::smatch loss;
  ASSERT_TRUE(std::regex_search(run.output, loss, std::regex(R"(validation: loss ([0-9.]+))"))) << run.output;
  EXPECT_LT(std::stod(loss[1]), 6.2) << run.output;
}

// A GPT-2 trained by transformers for a few seconds (tests/support/generate_reference.py),
// its model.safetensors and the tokenizer in a recipe: mixt generate --prompt, greedy,
// prints the text transformers' greedy generate decodes.
TEST_F(TokenizeCli, GenerateWithAPromptWritesTransformersGreedyText) {
  const fs::path out = dir_.path() / "gpl";
  ASSERT_EQ(testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", out.string()})
                .exit_code,
            0);
  const std::string prompt = "You may convey verbatim copies of the";
  const CommandResult reference = testing::run_command(
      "python3 " + testing::shell_quote((testing::source_dir() / "tests/support/generate_reference.py").string()) +
      " --tokenizer " + testing::shell_quote(tokenizer("gpt2_style")) + " --out " +
      testing::shell_quote((dir_.path() / "hf").string()) + " --prompt " + testing::shell_quote(prompt) +
      " --max-new-tokens 24 2>/dev/null");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const nlohmann::json expected = testing::json_document(reference.output);
  dir_.write("gen.yaml", R"(name: gen
task: { name: causal_lm }
model: { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 64, context_length: 64, dropout: 0,
         attention_dropout: 0, weights: hf/model.safetensors, tokenizer: )" + tokenizer("gpt2_style") + R"( }
precision: { name: fp32 }
optimizer: { name: adamw }
data:
  train: { name: tokens, files: [)" + (out / "train_000000.bin").string() + R"(], vocab: 1200, context: 64 }
)");
  const CommandResult generated = testing::run_mixt(
      {"generate", "gen.yaml", "--prompt", prompt, "--temperature", "0", "--max-new-tokens", "24"}, dir_.path());
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_EQ(generated.output, expected["text"].get<std::string>() + "\n");
  // The text is not the prompt again and again: the model learned GPL-3's words.
  EXPECT_GT(expected["text"].get<std::string>().size(), prompt.size() + 24);
  const CommandResult no_tokenizer = testing::run_mixt(
      {"generate", "gen.yaml", "model.tokenizer=missing.json", "--prompt", prompt}, dir_.path());
  EXPECT_EQ(no_tokenizer.exit_code, 2);
  EXPECT_THAT(no_tokenizer.output, HasSubstr("model.tokenizer: tokenizer file does not exist: missing.json"));
}

TEST_F(TokenizeCli, BadInputIsNamed) {
  const CommandResult missing =
      testing::run_mixt({"tokenize", "/nonexistent.txt", "--tokenizer", tokenizer("gpt2_style"), "--out", "o"},
                        dir_.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent.txt: no such file"));
  const fs::path jsonl = dir_.write("bad.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text field\"}\n");
  const CommandResult field = testing::run_mixt(
      {"tokenize", jsonl.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", "bad"}, dir_.path());
  EXPECT_EQ(field.exit_code, 1);
  EXPECT_THAT(field.output, HasSubstr(jsonl.string() + ":2: no string field 'text'"));
  EXPECT_FALSE(fs::exists(dir_.path() / "bad" / "train_000000.bin"));
  const CommandResult again =
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", "twice"}, dir_.path());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const CommandResult twice =
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", "twice"}, dir_.path());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.output, HasSubstr("twice already holds token shards"));
}

}  // namespace
}  // namespace mixt
