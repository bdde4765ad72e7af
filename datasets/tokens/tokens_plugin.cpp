// datasets/tokens — token streams for causal language modelling (GPT-2 training):
//   tokens: uint16 ids from nanoGPT .bin files or llm.c .bin shards, memory-mapped;
//   text:   one text file's bytes as the ids (vocabulary 256), for a start without a tokenizer.
// Both cut their stream into windows of context + 1 tokens (token_windows.h) and deliver
// inputs and targets [batch, context], the targets being the inputs shifted by one.
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>
#include <mixt/plugin.h>

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
      std::move(stream), o.windows, o.vocab, o.vocab, o.loader.for_context(context, context.split == "train"),
      o.where,
      std::string(widths.size() == 2 ? "uint16 and uint32" : widths.count(4) ? "uint32" : "uint16") + " token ids from " +
          formats_read(formats) + " (vocabulary " + std::to_string(o.vocab) + ")");
}

struct TextOptions {
  std::string file = kDefaultText;
  tokens::WindowKeys windows;
  mixt::LoaderKeys loader;
  mixt::RecipeSection where;
};

using XO = TextOptions;
const auto kTextOptions = tokens::with_loader_keys(
    mixt::OptionsOf<XO>()
        .add(&XO::file, "file", "a text file, read whole; each byte is a token (UTF-8 characters beyond ASCII are "
                                "several); relative to the directory mixt runs in")
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

std::unique_ptr<mixt::Dataset> make_text(const TextOptions& o, const mixt::DatasetContext& context) {
  auto stream = std::make_shared<const tokens::TokenStream>(std::vector<tokens::TokenRun>{read_text(o)});
  return tokens::make_token_dataset(std::move(stream), o.windows, 256, std::nullopt,
                                    o.loader.for_context(context, context.split == "train"), o.where,
                                    "UTF-8 bytes as tokens (vocabulary 256)");
}

void register_components(mixt::Registrar& registrar) {
  registrar.add_dataset("tokens",
                        "token ids from nanoGPT .bin files or llm.c shards (uint16, or uint32 past 65,536 tokens), "
                        "memory-mapped, in windows for causal language modelling",
                        kTokensOptions, make_tokens);
  registrar.add_dataset("text", "one text file's bytes as tokens (vocabulary 256), in windows for causal language "
                                "modelling without a tokenizer",
                        kTextOptions, make_text);
}

}  // namespace

MIXT_PLUGIN("tokens", "1.0.0", register_components)
