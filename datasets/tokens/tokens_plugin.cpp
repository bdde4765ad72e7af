// datasets/tokens — token streams for causal language modelling (GPT-2 training):
//   tokens: uint16 ids from nanoGPT .bin files or llm.c .bin shards, memory-mapped;
//   text:   one text file's bytes as the ids (vocabulary 256), for a start without a tokenizer.
// Both cut their stream into windows of context + 1 tokens (token_windows.h) and deliver
// inputs and targets [batch, context], the targets being the inputs shifted by one.
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/plugin.h>
#include <mixt/tokenizer.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "token_dataset.h"
#include "token_file.h"
#include "window_keys.h"

namespace {

namespace fs = std::filesystem;
using tokens::TokenFormat;

constexpr std::int64_t kGpt2Vocab = 50257;
// nanoGPT's configs: train_gpt2.py 12 x 1024 tokens, train_shakespeare_char.py 64 x 256 characters.
constexpr std::int64_t kTokensBatchSize = 12;
constexpr std::int64_t kTextBatchSize = 64;
constexpr const char* kDefaultText = "/usr/share/common-licenses/GPL-3";  // in every Debian

struct TokensOptions {
  std::vector<std::string> files;  // required
  TokenFormat format = TokenFormat::auto_detect;
  std::int64_t vocab = kGpt2Vocab;
  tokens::WindowKeys windows;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

// `files: a.bin` or `files: [a.bin, b.bin]`.
void read_files(const mixt::Config& c, TokensOptions& into) {
  if (!c.has("files")) mixt::RecipeSection(c).fail_missing("files");
  try {
    into.files = {c.string("files")};
    return;
  } catch (const mixt::Error&) {  // not one path: a list (or a mistake strings() reports)
  }
  into.files = c.strings("files", {});
  if (into.files.empty()) c.fail("files", "an empty list", "name at least one token file");
}

using TO = TokensOptions;
const auto kTokensOptions = tokens::with_loader_keys(
    mixt::OptionsOf<TO>()
        .read_with({{"files", "",
                     "a token file or a list of them (shards), read in order as one stream; relative to the "
                     "directory mixt runs in"}},
                   read_files)
        .choice(&TO::format, "format",
                {{"auto", TokenFormat::auto_detect}, {"nanogpt", TokenFormat::nanogpt}, {"llmc", TokenFormat::llmc}},
                "nanogpt: bare uint16 ids; llmc: llm.c's 1024-byte header, then uint16 ids (GPT-2's magic) or uint32 "
                "ids (LLaMA 3's, as mixt tokenize writes for vocabularies over 65,536); auto: llmc when a file "
                "starts with an llm.c magic, each file on its own")
        .add(&TO::vocab, "vocab", "token ids are below it; the class count the model gets (GPT-2: 50257)",
             mixt::at_least(1))
        .include(&TO::windows, tokens::window_keys(1024))
        .recipe_section(&TO::where),
    &TO::loader, kTokensBatchSize);

std::string formats_read(const std::set<TokenFormat>& formats) {
  if (formats.size() == 2) return "nanoGPT and llm.c files";
  return *formats.begin() == TokenFormat::llmc ? "llm.c files" : "nanoGPT files";
}

std::unique_ptr<mixt::Dataset> make_tokens(const TokensOptions& o, const mixt::DatasetContext& context) {
  std::vector<tokens::TokenRun> runs;
  std::set<TokenFormat> formats;
  std::set<int> widths;
  for (const std::string& path : o.files) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      o.where.fail("files", "token file does not exist: " + path,
                   "paths are relative to the directory mixt runs in; make the files with nanoGPT's prepare.py or "
                   "llm.c's dev/data scripts (docs/datasets.md)");
    }
    try {
      tokens::TokenFile file = tokens::open_token_file(path, o.format);
      formats.insert(file.format);
      widths.insert(file.run.width);
      runs.push_back(std::move(file.run));
    } catch (const tokens::TokenFileError& e) {
      o.where.fail("files", e.what());
    }
  }
  auto stream = std::make_shared<const tokens::TokenStream>(std::move(runs));
  return tokens::make_token_dataset(
      std::move(stream), o.windows, o.vocab, o.vocab, o.loader.for_context(context, context.split == "train"), o.where,
      std::string(widths.size() == 2 ? "uint16 and uint32"
                  : widths.count(4)  ? "uint32"
                                     : "uint16") +
          " token ids from " + formats_read(formats) + " (vocabulary " + std::to_string(o.vocab) + ")");
}

struct TextOptions {
  std::string file = kDefaultText;
  std::optional<std::string> tokenizer;  // none: the bytes are the tokens
  tokens::WindowKeys windows;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

using XO = TextOptions;
const auto kTextOptions = tokens::with_loader_keys(
    mixt::OptionsOf<XO>()
        .add(&XO::file, "file",
             "a text file, read whole; each byte is a token (UTF-8 characters beyond ASCII are "
             "several) unless a tokenizer is given; relative to the directory mixt runs in")
        .contextual(&XO::tokenizer, "tokenizer", "none: bytes",
                    "a tokenizer.json or tokenizer.model that encodes the text (vocabulary: its size) instead of bytes")
        .include(&XO::windows, tokens::window_keys(256))
        .recipe_section(&XO::where),
    &XO::loader, kTextBatchSize);

// The whole file, held by the run that points into it.
tokens::TokenRun read_text(const TextOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.file, ec)) o.where.fail("file", "text file does not exist: " + o.file);
  if (fs::is_directory(o.file, ec)) o.where.fail("file", o.file + " is a folder, not a text file");
  std::ifstream in(o.file, std::ios::binary);
  if (!in) o.where.fail("file", "cannot open " + o.file + ": " + std::strerror(errno));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::istreambuf_iterator<char>(in),
                                                           std::istreambuf_iterator<char>());
  tokens::TokenRun run;
  run.file = o.file;
  run.bytes = bytes->data();
  run.width = 1;
  run.count = static_cast<std::int64_t>(bytes->size());
  run.owner = std::move(bytes);
  return run;
}

// The file's text encoded by the tokenizer, as uint32 ids held by the run.
tokens::TokenRun encode_text(const TextOptions& o, const mixt::Tokenizer& tokenizer, tokens::TokenRun bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.bytes), static_cast<std::size_t>(bytes.count));
  std::vector<mixt::TokenId> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const mixt::Error& e) {
    o.where.fail("file", o.file + ": " + e.message());
  }
  auto held = std::make_shared<std::vector<std::uint32_t>>(ids.begin(), ids.end());
  tokens::TokenRun run;
  run.file = o.file;
  run.bytes = reinterpret_cast<const std::uint8_t*>(held->data());
  run.width = 4;
  run.count = static_cast<std::int64_t>(held->size());
  run.owner = std::move(held);
  return run;
}

std::unique_ptr<mixt::Dataset> make_text(const TextOptions& o, const mixt::DatasetContext& context) {
  tokens::TokenRun run = read_text(o);
  std::int64_t vocab = 256;
  std::string what = "UTF-8 bytes as tokens (vocabulary 256)";
  if (o.tokenizer) {
    std::error_code ec;
    if (!fs::is_regular_file(*o.tokenizer, ec))
      o.where.fail("tokenizer", "tokenizer file does not exist: " + *o.tokenizer);
    const std::unique_ptr<mixt::Tokenizer> tokenizer = mixt::load_tokenizer(*o.tokenizer);
    run = encode_text(o, *tokenizer, std::move(run));
    vocab = tokenizer->vocab_size();
    what = "tokens of " + tokenizer->describe();
  }
  auto stream = std::make_shared<const tokens::TokenStream>(std::vector<tokens::TokenRun>{std::move(run)});
  return tokens::make_token_dataset(std::move(stream), o.windows, vocab,
                                    o.tokenizer ? std::optional(vocab) : std::nullopt,
                                    o.loader.for_context(context, context.split == "train"), o.where, what);
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("tokens",
                        "token ids from nanoGPT .bin files or llm.c shards (uint16, or uint32 past 65,536 tokens), "
                        "memory-mapped, in windows for causal language modelling",
                        kTokensOptions, make_tokens);
  registrar.add_dataset("text",
                        "one text file's bytes (vocabulary 256) or a tokenizer's ids, in windows for causal language "
                        "modelling without a tokenizer",
                        kTextOptions, make_text);
}

}  // namespace

MIXT_PLUGIN("tokens", "1.0.0", register_components)
