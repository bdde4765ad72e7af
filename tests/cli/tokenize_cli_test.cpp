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

using testing::CommandResult;
using ::testing::HasSubstr;
using testing::TempDir;
namespace fs = std::filesystem;

const char* const kGpl = "/usr/share/common-licenses/GPL-3";

// The references (tokenizer_reference.py --wide, and generate_reference.py's model and text),
// made once per build tree by the ctest fixture tokenize_reference
// (tests/support/tokenize_reference_fixture.py).
const fs::path kReference = fs::path(testing::configured::binary_dir()) / "tests" / "tokenize_reference";

class TokenizeCli : public ::testing::Test {
 protected:
  static std::string tokenizer(const std::string& family) { return (kReference / family / "tokenizer.json").string(); }

  // llmc_shards_check.py's verdict on the shards in `out` for `inputs`.
  static nlohmann::json check(const std::string& family, const fs::path& out, const std::vector<std::string>& inputs,
                              const std::string& extra = "") {
    std::string command =
        "python3 " + testing::shell_quote((testing::source_dir() / "tests/support/llmc_shards_check.py").string()) +
        " --tokenizer " + testing::shell_quote(tokenizer(family)) + " --out " + testing::shell_quote(out.string()) +
        " " + extra;
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
};

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
  const nlohmann::json verdict = check("llama3_wide", out, {input.string(), kGpl}, "--separator '<|end_of_text|>'");
  EXPECT_TRUE(verdict["ok"].get<bool>()) << verdict.dump();
  EXPECT_EQ(verdict["width"], 4);
}

TEST_F(TokenizeCli, ItsShardsTrainAGpt2) {
  const fs::path out = dir_.path() / "gpl";
  ASSERT_EQ(
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", out.string()}).exit_code,
      0);
  dir_.write("lm.yaml", R"(name: lm
task: { name: causal_lm }
model: { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 64, context_length: 32, dropout: 0, attention_dropout: 0 }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 3.0e-3 }
data:
  train: { name: tokens, files: [)" +
                            (out / "train_000000.bin").string() +
                            R"(], vocab: 1200, context: 32, batch_size: 16 }
  val:   { name: tokens, files: [)" +
                            (out / "val_000000.bin").string() +
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
// saved in kReference/hf, and the text its greedy generate writes after kPrompt (the
// fixture's PROMPT).
const char* const kPrompt = "You may convey verbatim copies of the";

// mixt generate's text: its output without the line it writes first on stderr (the policy and
// how it draws).
std::string generated_text(const std::string& output) {
  return output.starts_with("mixt generate: ") ? output.substr(output.find('\n') + 1) : output;
}

const nlohmann::json& transformers_reference() {
  static const nlohmann::json reference = testing::json_document(testing::read_file(kReference / "generate.json"));
  return reference;
}

// The reference's model in a recipe: with a data section (the shards of `mixt tokenize`), or
// without one, the model's options saying all.
std::string gpt2_recipe(const fs::path& hf, const std::string& tokenizer, const std::string& data) {
  std::string recipe = R"(name: gen
task: { name: causal_lm }
model: { name: gpt2, num_layers: 2, num_heads: 2, hidden_dim: 64, context_length: 64, dropout: 0,
         attention_dropout: 0, vocab_size: 1200, weights: )";
  recipe.append((hf / "model.safetensors").string()).append(", tokenizer: ").append(tokenizer).append(" }\n");
  return recipe + data;
}

// mixt generate --prompt, greedy, prints the text transformers' greedy generate decodes, from
// a recipe with data and from one without.
TEST_F(TokenizeCli, GenerateWithAPromptWritesTransformersGreedyText) {
  const nlohmann::json& expected = transformers_reference();
  ASSERT_TRUE(expected.contains("text"));
  // The text is not the prompt again and again: the model learned GPL-3's words.
  EXPECT_GT(expected["text"].get<std::string>().size(), std::string(kPrompt).size() + 24);
  const fs::path out = dir_.path() / "gpl";
  ASSERT_EQ(
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", out.string()}).exit_code,
      0);
  const fs::path hf = kReference / "hf";
  dir_.write("with_data.yaml", gpt2_recipe(hf, tokenizer("gpt2_style"), R"(precision: { name: fp32 }
optimizer: { name: adamw }
data:
  train: { name: tokens, files: [)" + (out / "train_000000.bin").string() + R"(], vocab: 1200, context: 64 }
)"));
  dir_.write("data_less.yaml", gpt2_recipe(hf, tokenizer("gpt2_style"), ""));
  for (const char* recipe : {"with_data.yaml", "data_less.yaml"}) {
    const CommandResult generated = testing::run_mixt(
        {"generate", recipe, "--prompt", kPrompt, "--temperature", "0", "--max-new-tokens", "24"}, dir_.path());
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
    EXPECT_EQ(generated_text(generated.output), expected["text"].get<std::string>() + "\n") << recipe;
  }
  const CommandResult no_tokenizer = testing::run_mixt(
      {"generate", "with_data.yaml", "model.tokenizer=missing.json", "--prompt", kPrompt}, dir_.path());
  EXPECT_EQ(no_tokenizer.exit_code, 2);
  EXPECT_THAT(no_tokenizer.output, HasSubstr("model.tokenizer: tokenizer file does not exist: missing.json"));
}

// A recipe with no data section: check says what the model predicts; export needs no
// --input-shape, and its time axis goes up to the model's context (64), also when the export
// is traced shorter.
TEST_F(TokenizeCli, ADataLessRecipeChecksAndExportsUpToTheModelsContext) {
  ASSERT_TRUE(transformers_reference().contains("text"));
  const fs::path hf = kReference / "hf";
  dir_.write("data_less.yaml", gpt2_recipe(hf, tokenizer("gpt2_style"), ""));
  const CommandResult checked = testing::run_mixt({"check", "data_less.yaml"}, dir_.path());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, HasSubstr("data_less.yaml: ok for mixt generate and mixt export"));
  EXPECT_THAT(checked.output, HasSubstr("predicts  the next token of vocabulary 1200, up to 64 tokens"));
  EXPECT_THAT(checked.output, HasSubstr("tokenizer byte-level BPE, 1200 tokens"));
  const auto max_time = [&](const std::string& file) {
    const CommandResult read = testing::run_command(
        "python3 -c \"import onnx, json, sys; m = onnx.load(sys.argv[1]); "
        "print(json.loads({p.key: p.value for p in m.metadata_props}['mixt.input'])['max_time'])\" " +
        testing::shell_quote((dir_.path() / file).string()));
    EXPECT_EQ(read.exit_code, 0) << read.output;
    return read.output;
  };
  const CommandResult exported = testing::run_mixt({"export", "data_less.yaml", "-o", "lm.onnx"}, dir_.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("time up to 64"));
  EXPECT_EQ(max_time("lm.onnx"), "64\n");
  const CommandResult shorter =
      testing::run_mixt({"export", "data_less.yaml", "-o", "short.onnx", "--input-shape", "16"}, dir_.path());
  ASSERT_EQ(shorter.exit_code, 0) << shorter.output;
  EXPECT_EQ(max_time("short.onnx"), "64\n");
  const CommandResult run = testing::run_mixt({"run", "data_less.yaml"}, dir_.path());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("data.train"));
}

// A transformers directory, its weights in shards, as one line of a recipe: its config.json
// sizes the model, its tokenizer.json is the tokenizer, and the model gives transformers'
// logits (through mixt export's TorchScript file) and its greedy text.
TEST_F(TokenizeCli, ATransformersDirectoryIsOneLineOfARecipe) {
  const nlohmann::json& expected = transformers_reference();
  ASSERT_TRUE(expected.contains("text"));
  const fs::path sharded = kReference / "hf_sharded";
  ASSERT_TRUE(fs::exists(sharded / "model.safetensors.index.json"));
  dir_.write("from.yaml", "model: { name: gpt2, from: " + sharded.string() + " }\n");  // it implies causal_lm
  const CommandResult checked = testing::run_mixt({"check", "from.yaml"}, dir_.path());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, HasSubstr("predicts  the next token of vocabulary 1200, up to 64 tokens"));
  EXPECT_THAT(checked.output,
              HasSubstr("tokenizer byte-level BPE, 1200 tokens (" + (sharded / "tokenizer.json").string()));
  const CommandResult generated = testing::run_mixt(
      {"generate", "from.yaml", "--prompt", kPrompt, "--temperature", "0", "--max-new-tokens", "24"}, dir_.path());
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_EQ(generated_text(generated.output), expected["text"].get<std::string>() + "\n");

  const CommandResult exported = testing::run_mixt({"export", "from.yaml", "-o", "lm.pt"}, dir_.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const CommandResult compared = testing::run_command(
      "(python3 -c \"import sys, torch; from transformers import GPT2LMHeadModel; "
      "m = GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval(); t = torch.jit.load(sys.argv[2]); "
      "ids = torch.randint(0, 1200, (2, 40), generator=torch.Generator().manual_seed(0)); "
      "print(float((m(ids).logits - t(ids)).abs().max()))\" " +
      testing::shell_quote((kReference / "hf").string()) + " " +
      testing::shell_quote((dir_.path() / "lm.pt").string()) + ")");
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  // The last line is the figure (transformers writes its warnings before it).
  std::smatch figure;
  ASSERT_TRUE(std::regex_search(compared.output, figure, std::regex(R"(([0-9.e+-]+)\s*$)"))) << compared.output;
  EXPECT_LT(std::stod(figure[1]), 1e-4) << compared.output;
  EXPECT_THAT(exported.output, HasSubstr("from " + sharded.string() + ":"));

  const CommandResult disagrees = testing::run_mixt({"check", "from.yaml", "model.num_layers=3"}, dir_.path());
  EXPECT_EQ(disagrees.exit_code, 2);
  EXPECT_THAT(disagrees.output,
              HasSubstr("model.num_layers is 3, but " + (sharded / "config.json").string() + " has n_layer: 2"));
  const CommandResult both = testing::run_mixt({"check", "from.yaml", "model.weights=w.safetensors"}, dir_.path());
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.output, HasSubstr("give model.from or model.weights, not both"));
  dir_.write("llama_dir/config.json", R"({"model_type": "llama"})");
  const CommandResult other_type = testing::run_mixt({"check", "from.yaml", "model.from=llama_dir"}, dir_.path());
  EXPECT_EQ(other_type.exit_code, 2);
  EXPECT_THAT(other_type.output, HasSubstr("llama_dir/config.json is a 'llama' checkpoint; model 'gpt2' reads gpt2"));
  const CommandResult no_folder = testing::run_mixt({"check", "from.yaml", "model.from=nowhere"}, dir_.path());
  EXPECT_EQ(no_folder.exit_code, 2);
  EXPECT_THAT(no_folder.output, HasSubstr("model.from: not a folder: nowhere"));
  const CommandResult not_a_reader = testing::run_mixt({"check", "from.yaml", "model.name=resnet18"}, dir_.path());
  EXPECT_EQ(not_a_reader.exit_code, 2);
  EXPECT_THAT(not_a_reader.output, HasSubstr("model 'resnet18' does not read transformers checkpoints"));
}

TEST_F(TokenizeCli, BadInputIsNamed) {
  const CommandResult missing = testing::run_mixt(
      {"tokenize", "/nonexistent.txt", "--tokenizer", tokenizer("gpt2_style"), "--out", "o"}, dir_.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent.txt: no such file"));
  const fs::path jsonl = dir_.write("bad.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text field\"}\n");
  const CommandResult field = testing::run_mixt(
      {"tokenize", jsonl.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", "bad"}, dir_.path());
  EXPECT_EQ(field.exit_code, 1);
  EXPECT_THAT(field.output, HasSubstr(jsonl.string() + ":2: no string field 'text'"));
  EXPECT_FALSE(fs::exists(dir_.path() / "bad" / "train_000000.bin"));
  // Latin-1 inside a record: the line, the column and the byte, not only "not a JSON record".
  const fs::path latin1 = dir_.write("latin1.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"caf\xE9\"}\n");
  const CommandResult not_utf8 = testing::run_mixt(
      {"tokenize", latin1.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", "latin1"}, dir_.path());
  EXPECT_EQ(not_utf8.exit_code, 1);
  EXPECT_THAT(not_utf8.output, HasSubstr(latin1.string() + ":2:14: not UTF-8 (byte 0xE9)"));
  const fs::path broken = dir_.write("broken.jsonl", "{\"text\": \"fine\"\n");
  const CommandResult not_json = testing::run_mixt(
      {"tokenize", broken.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", "broken"}, dir_.path());
  EXPECT_EQ(not_json.exit_code, 1);
  EXPECT_THAT(not_json.output, HasSubstr(broken.string() + ":1: not a JSON record (column"));
  // Nothing but empty documents: the shards would hold separators alone.
  const fs::path empty_text = dir_.write("empty.txt", "");
  const fs::path empty_records = dir_.write("empty.jsonl", "{\"text\": \"\"}\n{\"text\": \"\"}\n");
  for (const fs::path& empty : {empty_text, empty_records}) {
    const CommandResult nothing = testing::run_mixt(
        {"tokenize", empty.string(), "--tokenizer", tokenizer("gpt2_style"), "--out", "nothing"}, dir_.path());
    EXPECT_EQ(nothing.exit_code, 2) << empty;
    EXPECT_THAT(nothing.output, HasSubstr("the inputs hold no text to tokenize")) << empty;
    EXPECT_FALSE(fs::exists(dir_.path() / "nothing" / "train_000000.bin"));
  }
  const CommandResult again =
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", "twice"}, dir_.path());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const CommandResult twice =
      testing::run_mixt({"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", "twice"}, dir_.path());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.output, HasSubstr("twice already holds token shards"));
  const auto usage = [&](const std::vector<std::string>& flags, const std::string& message) {
    std::vector<std::string> args{"tokenize", kGpl, "--tokenizer", tokenizer("gpt2_style"), "--out", "flags"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CommandResult r = testing::run_mixt(args, dir_.path());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(message));
  };
  usage({"--separator", "<|nope|>"}, "--separator: '<|nope|>' is not a token of");
  usage({"--val-fraction", "1"}, "--val-fraction must be in [0, 1)");
  usage({"--shard-tokens", "0"}, "--shard-tokens must be from 1 to 2^31 - 1");
  usage({"--separator", "<|endoftext|>", "--no-separator"}, "give --separator or --no-separator, not both");
  EXPECT_FALSE(fs::exists(dir_.path() / "flags" / "train_000000.bin"));
}

}  // namespace
}  // namespace mixt
