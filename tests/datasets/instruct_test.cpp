// The instruct dataset (datasets/instruct) against transformers and PyTorch, on what
// tests/golden/make_instruct_golden.py writes (the instruct_golden fixture): tokenizer folders
// trained there, one with Meta-Llama-3-Instruct's chat template and a small
// LlamaForCausalLM, one with SmolLM2-Instruct's ChatML template, one with Qwen2.5's ChatML
// logic (its default system message in Jinja escapes), and Llama 3.1's, Llama 3.2's and
// Qwen3's published templates; train.jsonl in the three sample forms; transformers'
// apply_chat_template ids, the labels TRL's prompt-completion masking gives, PyTorch's
// cross_entropy(ignore_index=-100) over them, and transformers' Llama over the samples packed
// (position_ids and a 4-D block-diagonal mask).
//
//  - the C++ chat formats give apply_chat_template's ids (a system message, several turns,
//    whitespace, add_generation_prompt), and the trained tokens are TRL's;
//  - the dataset's targets are those labels shifted by one, -100 elsewhere and in the padding;
//  - `mixt run recipes/llama/instruct.yaml` on the folder: the first step's loss and the
//    validation loss equal the reference's (fused loss or not);
//  - packing: rows of whole conversations with their positions; a packed batch's loss equals
//    the same samples' unpacked loss; a model that cannot take packed rows is a recipe error;
//  - a conversation longer than the context is cut and counted; a bad line is a recipe error
//    naming file:line; an unknown template one naming the file and the families; nothing of a
//    run is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "data_support.h"
#include "doc_tables.h"
#include "expect_error.h"
#include "mixt/helpers/chat_template.h"
#include "mixt/tokenizer.h"
#include "plugins/option_table.h"
#include "run_directories.h"

namespace mixt {
namespace {

const fs::path kGolden = fs::path(testing::configured::binary_dir()) / "tests" / "instruct_golden";

const nlohmann::json& golden() {
  static const nlohmann::json json = nlohmann::json::parse(testing::read_file(kGolden / "expected.json"));
  return json;
}

std::vector<ChatMessage> messages_of(const nlohmann::json& sample) {
  std::vector<ChatMessage> messages;
  for (const auto& m : sample["messages"]) {
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

std::vector<std::int64_t> ints(const nlohmann::json& list) { return list.get<std::vector<std::int64_t>>(); }

class ChatTemplates : public ::testing::TestWithParam<std::string> {};

// The family each folder's template is told as.
std::string family_of(const std::string& folder) {
  if (folder == "llama3") return "llama3";
  if (folder == "llama31" || folder == "llama32") return "llama3.1";
  if (folder == "qwen3") return "qwen3";
  return "chatml";
}

// Today as transformers' strftime_now("%d %b %Y") writes it.
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%d %b %Y", &local);
  return text;
}

TEST_P(ChatTemplates, IdsEqualApplyChatTemplateAndTheTrainedTokensAreTrls) {
  const fs::path folder = kGolden / GetParam();
  ChatTemplate chat = read_chat_template(folder / "tokenizer_config.json", std::nullopt);
  EXPECT_EQ(std::string(chat_family_name(chat.family)), family_of(GetParam()));
  if (GetParam() == "qwen") {
    EXPECT_EQ(chat.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  }
  if (GetParam() == "qwen3") {
    EXPECT_FALSE(chat.default_system.has_value());
  }
  // Llama 3.1's template dates its system header 26 Jul 2024; 3.2's today (strftime_now), so
  // the references were rendered with a date_string, given here too.
  if (GetParam() == "llama31") {
    EXPECT_EQ(chat.date_string, "26 Jul 2024");
  }
  if (GetParam() == "llama32") {
    EXPECT_EQ(chat.date_string, today());
    chat.date_string = golden()["llama32_date"].get<std::string>();
  }
  const auto tokenizer = load_tokenizer(folder / "tokenizer.json");
  const auto& samples = golden()[GetParam()]["samples"];
  // Every sample of train.jsonl; Qwen3's with three conversations with <think> blocks besides.
  ASSERT_EQ(samples.size(), GetParam() == "qwen3" ? 10u : 7u);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::vector<ChatMessage> messages = messages_of(samples[i]);
    const ChatTokens tokens = tokenize_chat(*tokenizer, render_chat(chat, messages));
    EXPECT_EQ(std::vector<std::int64_t>(tokens.ids.begin(), tokens.ids.end()), ints(samples[i]["ids"]))
        << "sample " << i;
    std::vector<std::int64_t> labels;
    for (std::size_t t = 0; t < tokens.ids.size(); ++t) labels.push_back(tokens.trained[t] ? tokens.ids[t] : -100);
    EXPECT_EQ(labels, ints(samples[i]["labels"])) << "sample " << i;

    const std::vector<ChatMessage> prompt(messages.begin(), messages.end() - 1);
    const ChatTokens generation = tokenize_chat(*tokenizer, render_chat(chat, prompt, /*add_generation_prompt=*/true));
    EXPECT_EQ(std::vector<std::int64_t>(generation.ids.begin(), generation.ids.end()),
              ints(samples[i]["generation_prompt"]))
        << "sample " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplates,
                         ::testing::Values("llama3", "chatml", "qwen", "llama31", "llama32", "qwen3"),
                         [](const auto& info) { return info.param; });

std::string instruct_section(const std::string& family, const std::string& more) {
  return "{name: instruct, file: " + (kGolden / "train.jsonl").string() +
         ", tokenizer: " + (kGolden / family / "tokenizer.json").string() + ", shuffle: false, workers: 0, " + more +
         "}";
}

// Rows of inputs and targets, checked against the reference's ids and labels cut to
// context + 1: inputs the ids but the last (then padding), targets the labels but the first
// (then -100).
void expect_rows(const Batch& batch, const nlohmann::json& samples, std::int64_t context,
                 const std::vector<std::size_t>& which) {
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{static_cast<std::int64_t>(which.size()), context}));
  ASSERT_EQ(batch.targets.sizes(), batch.inputs.sizes());
  const auto in = batch.inputs.accessor<std::int64_t, 2>();
  const auto out = batch.targets.accessor<std::int64_t, 2>();
  for (std::size_t row = 0; row < which.size(); ++row) {
    std::vector<std::int64_t> ids = ints(samples[which[row]]["ids"]);
    std::vector<std::int64_t> labels = ints(samples[which[row]]["labels"]);
    const auto length = std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()), context + 1);
    for (std::int64_t t = 0; t < context; ++t) {
      const auto r = static_cast<std::int64_t>(row);
      if (t + 1 < length) {
        EXPECT_EQ(in[r][t], ids[static_cast<std::size_t>(t)]) << "row " << row << ", token " << t;
        EXPECT_EQ(out[r][t], labels[static_cast<std::size_t>(t + 1)]) << "row " << row << ", token " << t;
      } else {
        EXPECT_EQ(out[r][t], -100) << "row " << row << ", padding " << t;
      }
    }
  }
}

TEST(InstructDataset, TargetsAreTheAssistantTokensShiftedAndThePromptIsIgnored) {
  testing::BuiltPlugins plugins;
  for (const std::string family : {"llama3", "chatml"}) {
    const auto data = testing::make_dataset(plugins, instruct_section(family, "context: 128, batch_size: 7"));
    EXPECT_EQ(data->size(), 7);
    EXPECT_EQ(data->num_classes(), golden()[family]["vocab"].get<std::int64_t>());
    EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{128}));
    const std::vector<Batch> batches = testing::collect_epoch(*data, 0);
    ASSERT_EQ(batches.size(), 1u);
    expect_rows(batches[0], golden()[family]["samples"], 128, {0, 1, 2, 3, 4, 5, 6});
  }
}

TEST(InstructDataset, ALongerConversationIsCutToTheContextAndCounted) {
  testing::BuiltPlugins plugins;
  // llama3's samples hold 67, 79, 42, 38, 44, 53 and 57 tokens: context 56 cuts two of them,
  // and each keeps its first assistant turn (from token 51 at the latest).
  const auto& samples = golden()["llama3"]["samples"];
  std::size_t longer = 0;
  for (const auto& s : samples) longer += s["ids"].size() > 57 ? 1 : 0;
  ASSERT_EQ(longer, 2u);
  ::testing::internal::CaptureStderr();
  const auto data = testing::make_dataset(plugins, instruct_section("llama3", "context: 56, batch_size: 7"));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warned, HasSubstr("data.train: 2 of 7 conversations of " + (kGolden / "train.jsonl").string() +
                                " are longer than context + 1 = 57 tokens and were cut to it (their ends dropped)\n"));
  ASSERT_EQ(data->size(), 7);
  expect_rows(testing::collect_epoch(*data, 0).at(0), samples, 56, {0, 1, 2, 3, 4, 5, 6});
}

TEST(InstructDataset, AConversationLeftWithoutAnAssistantTokenIsLeftOut) {
  testing::BuiltPlugins plugins;
  // Context 30: every sample is cut; the assistant's first token is number 51, 28, 25, 28,
  // 33, 27 and 53: samples 0, 4 and 6 keep none of it.
  ::testing::internal::CaptureStderr();
  const auto data = testing::make_dataset(plugins, instruct_section("llama3", "context: 30"));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warned, HasSubstr("7 of 7 conversations of " + (kGolden / "train.jsonl").string() +
                                " are longer than context + 1 = 31 tokens and were cut to it (their ends dropped); 3 "
                                "of them kept no assistant token and were left out"));
  ASSERT_EQ(data->size(), 4);
  expect_rows(testing::collect_epoch(*data, 0).at(0), golden()["llama3"]["samples"], 30, {1, 2, 3, 5});
  // None left: a recipe error at context.
  try {
    testing::make_dataset(plugins, instruct_section("llama3", "context: 20"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_THAT(e.what(), HasSubstr("data.context: no conversation of"));
  }
}

// A recipe error (exit 2) from the dataset's section, its message holding every `part`.
void expect_recipe_error(testing::BuiltPlugins& plugins, const std::string& section,
                         const std::vector<std::string>& parts) {
  try {
    testing::make_dataset(plugins, section);
    ADD_FAILURE() << "no error for " << section;
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    const std::string said = std::string(e.what()) + "\n" + e.hint();
    for (const std::string& part : parts) EXPECT_THAT(said, HasSubstr(part));
  }
}

TEST(InstructDataset, ABadLineIsARecipeErrorNamingFileAndLine) {
  testing::BuiltPlugins plugins;
  TempDir dir;
  const std::string good = R"({"prompt": "a", "response": "b"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"prompt\": \"a\", \"response\": ", "not valid JSON"},
      {R"({"question": "a", "answer": "b"})",
       R"(has none of "messages", "prompt"/"response", "instruction"/"output" (its keys: answer, question))"},
      {R"({"prompt": "a"})", "has no \"response\""},
      {R"({"prompt": "a", "response": 3})", "\"response\" is number, not a string"},
      {R"({"messages": [{"role": "user", "content": "a"}]})", "has no assistant message"},
      {R"({"messages": [{"role": "bot", "content": "a"}]})",
       "a message has role \"bot\"; the roles are system, user and assistant"},
      {R"({"messages": [{"role": "user"}]})", "has no \"content\""},
      {R"({"instruction": "a", "input": "b"})", "has no \"output\""},
      {"[1, 2]", "is a JSON array, not an object"},
      // Found by fuzzing (fuzz/regressions/jsonl): nlohmann's out_of_range escaped the reader.
      {R"({"prompt": 1e400, "response": "b"})", "not valid JSON (a number beyond a double's range)"},
  };
  for (const auto& [line, why] : cases) {
    const fs::path file = dir.write("bad.jsonl", good + "\n\n" + line + "\n" + good + "\n");
    expect_recipe_error(plugins,
                        "{name: instruct, file: " + file.string() +
                            ", tokenizer: " + (kGolden / "llama3" / "tokenizer.json").string() + "}",
                        {file.string() + ":3: " + why});
  }
}

TEST(InstructDataset, AnUnknownTemplateIsARecipeErrorNamingTheFileAndTheFamilies) {
  testing::BuiltPlugins plugins;
  TempDir dir;
  fs::copy_file(kGolden / "chatml" / "tokenizer.json", dir.path() / "tokenizer.json");
  const fs::path config =
      dir.write("tokenizer_config.json",
                R"({"chat_template": "{% for m in messages %}### {{ m.role }}: {{ m.content }}\n{% endfor %}"})");
  const std::string section = "{name: instruct, file: " + (kGolden / "train.jsonl").string() +
                              ", tokenizer: " + (dir.path() / "tokenizer.json").string();
  expect_recipe_error(plugins, section + "}",
                      {config.string() + ": its chat_template cannot be rendered", "llama3", "llama3.1", "chatml",
                       "qwen3", "template: NAME"});
  // Llama 3.1's kind of template (the knowledge-cutoff header) that gives no date.
  dir.write(
      "tokenizer_config.json",
      R"({"chat_template": "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023<|eot_id|>"})");
  expect_recipe_error(plugins, section + "}", {"Llama 3.1's kind", "neither from a date_string literal"});
  // A ChatML template with <think> blocks that is not Qwen3's (QwQ's kind: <think> opened in
  // the generation prompt, no last_query_index).
  dir.write(
      "tokenizer_config.json",
      R"({"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n<think>\n"})");
  expect_recipe_error(plugins, section + "}", {"reasoning blocks (<think>) that is not Qwen3's"});
  // No chat_template at all, and no tokenizer_config.json.
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  expect_recipe_error(plugins, section + "}", {config.string() + " has no chat_template"});
  fs::remove(config);
  expect_recipe_error(plugins, section + "}", {"no " + config.string()});
  // `template:` formats with a family whatever the file says.
  const auto data = testing::make_dataset(plugins, section +
                                                       ", template: chatml, context: 128, batch_size: 7, "
                                                       "shuffle: false, workers: 0}");
  ASSERT_EQ(data->size(), 7);
  // Without the template's default system message the ids differ from the folder's, so only
  // the samples that give their own system message compare.
  const Batch batch = testing::collect_epoch(*data, 0).at(0);
  expect_rows(Batch{batch.inputs.narrow(0, 0, 1), batch.targets.narrow(0, 0, 1)}, golden()["chatml"]["samples"], 128,
              {0});
}

// Llama 3.2's template dates its system header today; `date:` gives the reference's date, and
// the rows are then apply_chat_template's with that date_string. Another family has no date.
TEST(InstructDataset, DateGivesLlama32sTemplateItsDate) {
  testing::BuiltPlugins plugins;
  const std::string date = golden()["llama32_date"].get<std::string>();
  const auto data = testing::make_dataset(
      plugins, "{name: instruct, file: " + (kGolden / "train.jsonl").string() +
                   ", tokenizer: " + (kGolden / "llama32" / "tokenizer.json").string() +
                   ", shuffle: false, workers: 0, context: 128, batch_size: 7, date: '" + date + "'}");
  expect_rows(testing::collect_epoch(*data, 0).at(0), golden()["llama32"]["samples"], 128, {0, 1, 2, 3, 4, 5, 6});
  expect_recipe_error(plugins, instruct_section("llama3", "date: '26 Jul 2024'"),
                      {"data.date: the llama3 chat format writes no date"});
}

TEST(InstructDataset, FromAndToSplitTheLines) {
  testing::BuiltPlugins plugins;
  const auto train = testing::make_dataset(plugins, instruct_section("llama3", "context: 128, to: 0.7"));
  const auto val = testing::make_dataset(plugins, instruct_section("llama3", "context: 128, from: 0.7, batch_size: 7"));
  EXPECT_EQ(train->size(), 4);  // floor(0.7 * 7) lines
  EXPECT_EQ(val->size(), 3);
  expect_rows(testing::collect_epoch(*val, 0).at(0), golden()["llama3"]["samples"], 128, {4, 5, 6});
}

// --- packing ---------------------------------------------------------------------------------

// Packed rows: each sample's (input, target) pairs one after another, greedily in order, as the
// reference packed them; targets [rows, 2, context]: the labels shifted, then the positions.
TEST(InstructPacking, RowsHoldWholeConversationsOneAfterAnotherWithTheirPositions) {
  testing::BuiltPlugins plugins;
  const auto& packed = golden()["packed"];
  const auto context = packed["context"].get<std::int64_t>();
  const auto& samples = golden()["llama3"]["samples"];
  const auto data = testing::make_dataset(
      plugins, instruct_section("llama3", "packing: true, context: " + std::to_string(context) + ", batch_size: 8"));
  const auto rows = static_cast<std::int64_t>(packed["rows"].size());
  ASSERT_EQ(rows, 4);  // [0], [1, 2], [3, 4], [5, 6]
  ASSERT_EQ(data->size(), rows);
  EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{context}));
  const std::vector<Batch> batches = testing::collect_epoch(*data, 0);
  ASSERT_EQ(batches.size(), 1u);
  const Batch& batch = batches[0];
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{rows, context}));
  ASSERT_EQ(batch.targets.sizes(), (std::vector<std::int64_t>{rows, 2, context}));
  const auto in = batch.inputs.accessor<std::int64_t, 2>();
  const auto out = batch.targets.accessor<std::int64_t, 3>();
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t at = 0;
    for (const auto& member : packed["rows"][static_cast<std::size_t>(r)]) {
      const auto& sample = samples[member.get<std::size_t>()];
      const std::vector<std::int64_t> ids = ints(sample["ids"]), labels = ints(sample["labels"]);
      for (std::size_t t = 0; t + 1 < ids.size(); ++t, ++at) {
        EXPECT_EQ(in[r][at], ids[t]) << "row " << r << ", token " << at;
        EXPECT_EQ(out[r][0][at], labels[t + 1]) << "row " << r << ", token " << at;
      }
    }
    for (std::int64_t t = at; t < context; ++t) EXPECT_EQ(out[r][0][t], -100) << "row " << r << ", padding " << t;
    const std::vector<std::int64_t> positions = ints(packed["positions"][static_cast<std::size_t>(r)]);
    for (std::int64_t t = 0; t < context; ++t) {
      EXPECT_EQ(out[r][1][t], positions[static_cast<std::size_t>(t)]) << "row " << r << ", position " << t;
    }
  }
}

TEST(InstructPacking, AConversationLongerThanTheContextIsCutAndCounted) {
  testing::BuiltPlugins plugins;
  ::testing::internal::CaptureStderr();
  const auto data = testing::make_dataset(plugins, instruct_section("llama3", "packing: true, context: 56"));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warned, HasSubstr("data.train: 2 of 7 conversations of " + (kGolden / "train.jsonl").string() +
                                " are longer than context + 1 = 57 tokens and were cut to it (their ends dropped)\n"));
  // 56 (cut), 56 (cut), 41, 37, 43, 52 and 56 pairs: no two fit one row of 56.
  EXPECT_EQ(data->size(), 7);
}

// docs/instruct.md's option table is the declarations written out.
TEST(InstructDocs, TheOptionTableIsTheDeclarations) {
  testing::BuiltPlugins plugins;
  const std::string rows = option_table_rows(plugins.registry.find(ComponentKind::dataset, "instruct")->info.options);
  EXPECT_EQ(testing::doc_table_rows("instruct.md", "### `instruct` options"), rows)
      << "docs/instruct.md's table should read:\n"
      << rows;
}

// --- mixt run ------------------------------------------------------------------------------

struct Losses {
  std::vector<double> steps;
  std::optional<double> val;
};

Losses losses_of(const fs::path& run_dir) {
  Losses losses;
  std::istringstream lines(testing::read_file(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "step") losses.steps.push_back(event["loss"].get<double>());
    if (event.contains("val_loss")) losses.val = event["val_loss"].get<double>();
  }
  return losses;
}

std::vector<std::string> recipe_args(const TempDir& dir) {
  const std::string source = testing::configured::source_dir();
  return {"run",
          source + "/recipes/llama/instruct.yaml",
          "model.from=" + (kGolden / "llama3").string(),
          "data.train.file=" + (kGolden / "train.jsonl").string(),
          "data.val.file=" + (kGolden / "train.jsonl").string(),
          "data.train.to=1.0",
          "data.val.from=0.0",
          "data.train.context=96",
          "data.val.context=96",
          "data.train.batch_size=4",
          "data.train.shuffle=false",
          "data.val.batch_size=8",
          "precision={_delete_: true, name: fp32}",
          "trainer.epochs=1",
          "trainer.max_steps_per_epoch=1",
          "trainer.log_every=1",
          "trainer.threads=1",
          "callbacks=[]",
          "output=" + (dir.path() / "runs").string()};
}

class InstructRun : public ::testing::TestWithParam<bool> {};

TEST_P(InstructRun, TheMaskedLossEqualsPyTorchsCrossEntropyWithIgnoreIndex) {
  TempDir dir;
  std::vector<std::string> args = recipe_args(dir);
  args.push_back(std::string("task.fused_loss=") + (GetParam() ? "true" : "false"));
  const CommandResult run = run_mixt(args, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path run_dir = testing::only_run_directory(dir.path() / "runs" / "llama_instruct");
  ASSERT_FALSE(run_dir.empty());
  const Losses losses = losses_of(run_dir);
  ASSERT_EQ(losses.steps.size(), 1u) << run.output;
  ASSERT_TRUE(losses.val.has_value()) << run.output;
  // The step's loss: the first 4 samples' mean over their trained tokens.
  const double expected = golden()["loss_first_batch"].get<double>();
  std::cout << "step loss " << losses.steps[0] << ", PyTorch " << expected << ", difference "
            << losses.steps[0] - expected << "\n";
  EXPECT_NEAR(losses.steps[0], expected, 1e-5) << run.output;
  // What the prompt tokens would add is far above that: the masking is what is compared.
  EXPECT_GT(std::abs(golden()["loss_first_batch_unmasked"].get<double>() - expected), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Loss, InstructRun, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("fused") : std::string("plain"); });

// Packed rows through llama (attention kept inside each sample, positions restarting) and
// causal_lm: the first step's loss over 2 rows (samples 0, 1 and 2) and the validation loss
// over all 4 rows equal transformers' LlamaForCausalLM given the same rows, position_ids and a
// 4-D block-diagonal mask, which equal PyTorch's over the same samples unpacked bit for bit.
class InstructPackedRun : public ::testing::TestWithParam<bool> {};

TEST_P(InstructPackedRun, APackedBatchsLossEqualsTheSameSamplesUnpacked) {
  const auto& packed = golden()["packed"];
  TempDir dir;
  std::vector<std::string> args = recipe_args(dir);
  const std::string context = std::to_string(packed["context"].get<std::int64_t>());
  const std::vector<std::string> packing = {
      "data.train.packing=true",
      "data.val.packing=true",
      "data.train.context=" + context,
      "data.val.context=" + context,
      "data.train.batch_size=" + std::to_string(packed["batch"].get<std::int64_t>()),
      "optimizer.lr=0",  // the validation after the step sees the reference's weights
      std::string("task.fused_loss=") + (GetParam() ? "true" : "false")};
  args.insert(args.end(), packing.begin(), packing.end());
  const CommandResult run = run_mixt(args, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Losses losses = losses_of(testing::only_run_directory(dir.path() / "runs" / "llama_instruct"));
  ASSERT_EQ(losses.steps.size(), 1u) << run.output;
  ASSERT_TRUE(losses.val.has_value()) << run.output;
  // The references agree: packed in transformers = unpacked in PyTorch.
  EXPECT_EQ(packed["loss_first_batch"].get<double>(), packed["loss_first_batch_unpacked"].get<double>());
  EXPECT_EQ(packed["loss_all"].get<double>(), golden()["loss_all"].get<double>());
  const double step = packed["loss_first_batch"].get<double>(), all = packed["loss_all"].get<double>();
  std::cout << "packed step loss " << losses.steps[0] << ", unpacked reference " << step << ", difference "
            << losses.steps[0] - step << "\npacked val_loss " << *losses.val << ", unpacked reference " << all
            << ", difference " << *losses.val - all << "\n";
  EXPECT_NEAR(losses.steps[0], step, 1e-5) << run.output;
  EXPECT_NEAR(*losses.val, all, 1e-5) << run.output;
  // Attention across the samples' borders would be off by more than that.
  EXPECT_GT(std::abs(packed["loss_all_attending_across"].get<double>() - all), 5e-5);
}

// A model that cannot keep attention inside each packed sample (gpt2 has no PackedModel): a
// recipe error naming the interface, exit code 2, rather than samples that see each other.
TEST(InstructPackedRecipe, AModelThatCannotTakePackedRowsIsARecipeError) {
  TempDir dir;
  std::vector<std::string> args = recipe_args(dir);
  const std::string tokenizer = (kGolden / "llama3" / "tokenizer.json").string();
  for (const std::string& more :
       std::vector<std::string>{"model={_delete_: true, name: gpt2, num_layers: 1, num_heads: 2, hidden_dim: 32, "
                                "context_length: 128}",
                                "data.train.tokenizer=" + tokenizer, "data.val.tokenizer=" + tokenizer,
                                "data.train.packing=true", "data.train.context=128", "data.val.context=128"}) {
    args.push_back(more);
  }
  const CommandResult run = run_mixt(args, dir.path());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("data.train's rows are packed (several samples one after another), and the model "
                                    "cannot keep attention inside each: it does not derive from mixt::PackedModel"));
  EXPECT_THAT(run.output, HasSubstr("packing: false"));
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "nothing of the run is written";
}

INSTANTIATE_TEST_SUITE_P(Loss, InstructPackedRun, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("fused") : std::string("plain"); });

TEST(InstructRecipe, TheValidationLossIsTheMeanOverEveryTrainedToken) {
  TempDir dir;
  std::vector<std::string> args = recipe_args(dir);
  args.push_back("optimizer.lr=0");  // the validation after the step sees the reference's weights
  const CommandResult run = run_mixt(args, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Losses losses = losses_of(testing::only_run_directory(dir.path() / "runs" / "llama_instruct"));
  ASSERT_TRUE(losses.val.has_value()) << run.output;
  const double expected = golden()["loss_all"].get<double>();
  std::cout << "val_loss " << *losses.val << ", PyTorch " << expected << ", difference " << *losses.val - expected
            << "\n";
  EXPECT_NEAR(*losses.val, expected, 1e-5) << run.output;
}

TEST(InstructRecipe, ABadLineExitsTwoNamingItAndWritesNothing) {
  TempDir dir;
  const fs::path bad = dir.write("bad.jsonl", "{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"a\"}\n");
  std::vector<std::string> args = recipe_args(dir);
  args.push_back("data.train.file=" + bad.string());
  const CommandResult run = run_mixt(args, dir.path());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr(bad.string() + ":2: has no \"response\""));
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "nothing of the run is written";
}

// --- mixt generate --chat -------------------------------------------------------------------

// The prompt as a user turn with the generation prompt (apply_chat_template's ids), then
// greedy tokens as transformers' generate draws them; the turn's end is a stop token.
TEST(InstructGenerate, ChatFormatsThePromptAsAUserTurnAsApplyChatTemplateDoes) {
  const auto& c = golden()["chat_generation"];
  TempDir dir;
  const fs::path recipe =
      dir.write("chat.yaml", "model: {name: llama, from: '" + (kGolden / "llama3").string() + "'}\n");
  const CommandResult run =
      run_mixt({"generate", recipe.string(), "--chat", "--prompt", c["prompt"].get<std::string>(), "--max-new-tokens",
                std::to_string(c["max_new_tokens"].get<int>()), "--temperature", "0"},
               dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr(c["text"].get<std::string>() + "\n"));
  EXPECT_THAT(run.output, HasSubstr(std::to_string(c["eot"].get<int>())));
  EXPECT_THAT(run.output, HasSubstr("<|eot_id|>, the chat's end of turn"));
  // The prompt's ids are the template's, which ChatTemplates checks against apply_chat_template.
  const auto tokenizer = load_tokenizer(kGolden / "llama3" / "tokenizer.json");
  const ChatTemplate chat = read_chat_template(kGolden / "llama3" / "tokenizer_config.json", std::nullopt);
  const ChatTokens ids = tokenize_chat(*tokenizer, render_chat(chat, {{"user", c["prompt"].get<std::string>()}}, true));
  EXPECT_EQ(std::vector<std::int64_t>(ids.ids.begin(), ids.ids.end()), ints(c["prompt_ids"]));
}

// --date: Llama 3.2's template (which would write today) with the day given, as
// apply_chat_template(..., date_string=DATE) renders it; the llama3 model, whose tokenizer
// has the same vocabulary, draws after it. Without --chat, or for a template that writes no
// date, it is a usage error.
TEST(InstructGenerate, DateWritesTheSystemHeadersDayAsApplyChatTemplateDoes) {
  const auto& c = golden()["chat_generation"];
  const auto& dated = c["llama32_dated"];
  TempDir dir;
  const fs::path recipe =
      dir.write("chat.yaml", "model: {name: llama, from: '" + (kGolden / "llama3").string() + "', tokenizer: '" +
                                 (kGolden / "llama32" / "tokenizer.json").string() + "'}\n");
  const std::vector<std::string> chat = {
      "generate", recipe.string(), "--chat", "--prompt", c["prompt"].get<std::string>(), "--max-new-tokens",
      "1",        "--temperature", "0"};
  std::vector<std::string> args = chat;
  args.insert(args.end(), {"--date", dated["date"].get<std::string>()});
  const CommandResult run = run_mixt(args, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr(dated["prompt_text"].get<std::string>())) << "transformers' rendering";
  args.back() = "01 Feb 2031";
  const CommandResult other = run_mixt(args, dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_THAT(other.output, HasSubstr("Today Date: 01 Feb 2031\n"));

  args = {"generate", recipe.string(), "--prompt", "a", "--date", "01 Feb 2031"};
  const CommandResult without_chat = run_mixt(args, dir.path());
  EXPECT_EQ(without_chat.exit_code, 2) << without_chat.output;
  EXPECT_THAT(without_chat.output, HasSubstr("--date dates a chat's system header: give --chat too"));
  args = chat;
  args.insert(args.end(), {"--date", ""});
  const CommandResult empty = run_mixt(args, dir.path());
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_THAT(empty.output, HasSubstr("--date needs a date"));
  const fs::path llama3 =
      dir.write("llama3.yaml", "model: {name: llama, from: '" + (kGolden / "llama3").string() + "'}\n");
  args = chat;
  args[1] = llama3.string();
  args.insert(args.end(), {"--date", "01 Feb 2031"});
  const CommandResult undated = run_mixt(args, dir.path());
  EXPECT_EQ(undated.exit_code, 2) << undated.output;
  EXPECT_THAT(undated.output, HasSubstr("--date: the llama3 chat format of"));
  EXPECT_THAT(undated.output, HasSubstr("writes no date"));
}

TEST(InstructGenerate, ChatWithoutATemplateIsARecipeErrorNamingTheFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "folder");
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    fs::copy_file(kGolden / "llama3" / name, dir.path() / "folder" / name);
  }
  const fs::path recipe =
      dir.write("chat.yaml", "model: {name: llama, from: '" + (dir.path() / "folder").string() + "'}\n");
  const CommandResult run = run_mixt({"generate", recipe.string(), "--chat", "--prompt", "hello"}, dir.path());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("no " + (dir.path() / "folder" / "tokenizer_config.json").string()));
}

}  // namespace
}  // namespace mixt
