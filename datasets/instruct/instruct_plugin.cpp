// datasets/instruct — instruction data for fine-tuning a language model (task causal_lm): a
// JSONL file of conversations, each formatted with the checkpoint's chat template
// (mixt/helpers/chat_template.h), tokenized, and given as inputs and targets [batch, context] in which every
// target that is not an assistant's token is -100, the ignore index of causal_lm's loss: only
// the responses are trained, as TRL and torchtune train them (docs/instruct.md).
//
// Each line holds one sample in one of three forms:
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
//   {"prompt": "...", "response": "..."}  (and an optional "system")
//   {"instruction": "...", "input": "...", "output": "..."}  (Alpaca's; input may be empty or absent)
//
// With packing: true, several conversations share a row, each attending only to itself
// (conversation.h, mixt/packed_sequences.h).
#include <mixt/error.h>
#include <mixt/helpers/chat_template.h>
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/packed_sequences.h>
#include <mixt/plugin.h>
#include <mixt/tokenizer.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "conversation.h"
#include "instruct_lines.h"

namespace {

namespace fs = std::filesystem;
using mixt::ChatFamily;

using mixt::datasets::instruct::BadLine;
using mixt::datasets::instruct::Conversation;
using mixt::datasets::instruct::Conversations;
using mixt::datasets::instruct::messages_of_line;
using mixt::datasets::instruct::PackedConversations;

struct InstructOptions {
  std::string file;                      // required
  std::optional<std::string> tokenizer;  // model.from's when absent
  std::string chat_template = "auto";
  std::optional<std::string> date;  // llama3.1's "Today Date": the template's when absent
  std::int64_t context = 512;
  bool packing = false;
  double from = 0.0;
  double to = 1.0;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

class InstructDataset : public mixt::LoaderDataset, public mixt::DescribesPreprocessing, public mixt::PacksRows {
 public:
  InstructDataset(std::shared_ptr<const mixt::SampleSource> source, mixt::LoaderOptions options, std::int64_t vocab,
                  std::int64_t context, std::string preprocessing, bool packed)
      : LoaderDataset(std::move(source), std::move(options), vocab, {context}),
        preprocessing_(std::move(preprocessing)),
        packed_(packed) {}
  std::string preprocessing() const override { return preprocessing_; }
  bool packs_rows() const override { return packed_; }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can = LoaderDataset::capabilities();
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::string preprocessing_;
  bool packed_;
};

using IO = InstructOptions;
const auto kOwnOptions =
    mixt::OptionsOf<IO>()
        .required(&IO::file, "file",
                  "a JSONL file, one sample a line: {messages: [{role, content}, ...]}, {prompt, response} or "
                  "Alpaca's {instruction, input, output}; relative to the directory mixt runs in")
        .contextual(&IO::tokenizer, "tokenizer", "model.from's",
                    "the tokenizer.json (or tokenizer.model) that encodes the samples; its folder's "
                    "tokenizer_config.json holds the chat template")
        .add(&IO::chat_template, "template",
             "the chat format: auto (told from tokenizer_config.json's chat_template), llama3, llama3.1, chatml or "
             "qwen3",
             mixt::one_of({"auto", "llama3", "llama3.1", "chatml", "qwen3"}))
        .contextual(&IO::date, "date", "the template's",
                    "llama3.1's \"Today Date\" (e.g. 26 Jul 2024): Llama 3.1's template writes 26 Jul 2024, 3.2's "
                    "the day the data is formatted, as transformers renders them")
        .add(&IO::context, "context",
             "tokens per sample (T); a longer conversation is cut to context + 1 tokens, its end dropped",
             mixt::at_least(1))
        .add(&IO::packing, "packing",
             "fill each row of context tokens with whole conversations one after another (greedy, in file order), "
             "attention kept inside each (a model that takes packed rows: llama)")
        .add(&IO::from, "from", "start of the samples used, a fraction of the lines (val: the train's to)",
             mixt::between(0, 1))
        .add(&IO::to, "to", "end of the samples used, a fraction of the lines (train: 0.9 keeps 10% for val)",
             mixt::between(0, 1))
        .rule("to",
              [](const IO& o) -> std::optional<std::string> {
                if (o.from < o.to) return std::nullopt;
                return "must be above from (" + mixt::format_yaml(o.from) + ")";
              })
        .recipe_section(&IO::where);

// The loader's keys but on_bad_sample: a bad line is an error when the dataset is built, no
// sample is skipped later, so that key is refused where written.
const auto kOptions = [] {
  const mixt::OptionsOf<mixt::LoaderKeys> group = mixt::loader_keys(8);
  std::vector<mixt::OptionDoc> docs;
  for (const mixt::OptionDoc& doc : group.docs()) {
    if (doc.name != "on_bad_sample") docs.push_back(doc);
  }
  return kOwnOptions
      .refuse({"on_bad_sample"},
              "every line is checked when the dataset is built: a bad one is an error, never skipped",
              "remove on_bad_sample")
      .read_with(docs, [group](const mixt::Config& c, IO& into) { into.loader = group.read(c); });
}();

[[noreturn]] void fail_line(const IO& o, std::int64_t line, const std::string& why) {
  o.where.fail("file", o.file + ":" + std::to_string(line) + ": " + why,
               "each line is one JSON object: {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}, "
               "{\"prompt\": ..., \"response\": ...} or {\"instruction\": ..., \"input\": ..., \"output\": ...}");
}

std::unique_ptr<mixt::Dataset> make_instruct(const IO& o, const mixt::DatasetContext& context) {
  std::error_code ec;
  if (!o.tokenizer) {
    o.where.fail_missing("tokenizer");
  }
  if (!fs::is_regular_file(*o.tokenizer, ec))
    o.where.fail("tokenizer", "tokenizer file does not exist: " + *o.tokenizer);
  const fs::path config = fs::path(*o.tokenizer).parent_path() / "tokenizer_config.json";
  const std::optional<ChatFamily> family = mixt::chat_family_named(o.chat_template);  // none for auto
  mixt::ChatTemplate chat;
  try {
    chat = mixt::read_chat_template(config, family);
  } catch (const mixt::ChatTemplateError& e) {
    o.where.fail(o.where.given("tokenizer") ? "tokenizer" : "template", e.what(),
                 "the families written here: " + mixt::chat_families_supported() +
                     "; `template: NAME` formats with one of them whatever the file says");
  }
  if (o.date) {
    if (chat.family != ChatFamily::llama3_1) {
      o.where.fail("date", std::string("the ") + mixt::chat_family_name(chat.family) + " chat format writes no date",
                   "remove date (only llama3.1's template, Llama 3.1's and 3.2's, dates its system header)");
    }
    chat.date_string = *o.date;
  }
  const std::unique_ptr<mixt::Tokenizer> tokenizer = mixt::load_tokenizer(*o.tokenizer);

  if (!fs::exists(o.file, ec)) o.where.fail("file", "instruction file does not exist: " + o.file);
  if (fs::is_directory(o.file, ec)) o.where.fail("file", o.file + " is a folder, not a JSONL file");
  std::ifstream in(o.file, std::ios::binary);
  if (!in) o.where.fail("file", "cannot open " + o.file);
  // Every line is read and checked, the whole file, before any is used.
  std::vector<std::pair<std::int64_t, std::vector<mixt::ChatMessage>>> samples;
  std::string text;
  for (std::int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines (a trailing one)
    try {
      samples.emplace_back(line, messages_of_line(text));
    } catch (const BadLine& e) {
      fail_line(o, line, e.what());
    }
  }
  if (samples.empty()) o.where.fail("file", o.file + " holds no samples");

  const auto total = static_cast<std::int64_t>(samples.size());
  const auto first = static_cast<std::int64_t>(std::floor(o.from * static_cast<double>(total)));
  const auto last = static_cast<std::int64_t>(std::floor(o.to * static_cast<double>(total)));
  if (last <= first) {
    o.where.fail("to",
                 o.file + " holds " + std::to_string(total) + " samples; from " + mixt::format_yaml(o.from) + " to " +
                     mixt::format_yaml(o.to) + " takes none of them",
                 "widen from/to or give more samples");
  }
  std::vector<Conversation> conversations;
  std::int64_t cut = 0;
  std::int64_t emptied = 0;
  for (std::int64_t i = first; i < last; ++i) {
    const auto& [line, messages] = samples[static_cast<std::size_t>(i)];
    mixt::ChatTokens tokens;
    try {
      tokens = mixt::tokenize_chat(*tokenizer, mixt::render_chat(chat, messages));
    } catch (const mixt::Error& e) {
      fail_line(o, line, e.message());
    }
    Conversation c;
    c.line = line;
    c.ids.assign(tokens.ids.begin(), tokens.ids.end());
    c.trained = std::move(tokens.trained);
    if (static_cast<std::int64_t>(c.ids.size()) > o.context + 1) {
      ++cut;
      c.ids.resize(static_cast<std::size_t>(o.context + 1));
      c.trained.resize(static_cast<std::size_t>(o.context + 1));
    }
    // Only targets 1..: the first token is never a target.
    bool trains = false;
    for (std::size_t t = 1; t < c.trained.size(); ++t) trains = trains || c.trained[t];
    if (!trains) {
      ++emptied;
      continue;
    }
    conversations.push_back(std::move(c));
  }
  const std::int64_t used = last - first;
  if (cut > 0 && context.rank == 0) {
    mixt::warn("data." + context.split + ": " + std::to_string(cut) + " of " + std::to_string(used) +
               " conversations of " + o.file + " are longer than context + 1 = " + std::to_string(o.context + 1) +
               " tokens and were cut to it (their ends dropped)" +
               (emptied > 0 ? "; " + std::to_string(emptied) + " of them kept no assistant token and were left out"
                            : std::string()));
  }
  if (conversations.empty()) {
    o.where.fail("context",
                 "no conversation of " + o.file +
                     " keeps an assistant token within context + 1 = " + std::to_string(o.context + 1) + " tokens",
                 "raise context");
  }
  const std::int64_t pad = tokenizer->end_of_text().value_or(0);
  const std::int64_t kept = static_cast<std::int64_t>(conversations.size());
  std::shared_ptr<const mixt::SampleSource> source;
  std::string layout = ", padded to " + std::to_string(o.context);
  if (o.packing) {
    auto packed = std::make_shared<const PackedConversations>(std::move(conversations), o.context, pad, o.file);
    layout = ", packed into " + std::to_string(packed->size()) + " rows of " + std::to_string(o.context) +
             " (attention inside each conversation)";
    source = std::move(packed);
  } else {
    source = std::make_shared<const Conversations>(std::move(conversations), o.context, pad, o.file);
  }
  return std::make_unique<InstructDataset>(
      std::move(source), o.loader.for_context(context, context.split == "train"), tokenizer->vocab_size(), o.context,
      std::to_string(kept) + " conversations of " + o.file + " in the " + mixt::chat_family_name(chat.family) +
          " chat format, tokens of " + tokenizer->describe() + layout + "; targets of prompt tokens -100",
      o.packing);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("instruct",
                        "instruction data (JSONL conversations) in the checkpoint's chat template for causal_lm, the "
                        "prompt masked from the loss (targets -100): only the assistant's tokens are trained",
                        kOptions, make_instruct);
}

}  // namespace

MIXT_PLUGIN("instruct", "1.1.0", register_components)
