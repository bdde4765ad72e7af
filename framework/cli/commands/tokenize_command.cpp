#include "commands/tokenize_command.h"

#include <mixt/error.h>
#include <mixt/tokenizer.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <thread>

#include "common/interrupt.h"
#include "files/text_documents.h"
#include "files/token_shards.h"
#include "reports/thousands.h"

namespace mixt::cli {

namespace fs = std::filesystem;

namespace {

// Documents are encoded in batches of about this much text, each spread over the threads.
constexpr std::size_t kBatchDocuments = 4096;
constexpr std::size_t kBatchBytes = 16u << 20;

using Clock = std::chrono::steady_clock;

// The id put before each document (llm.c's fineweb.py puts <|endoftext|> first), if any.
std::optional<TokenId> separator_of(const TokenizeOptions& o, const Tokenizer& tokenizer) {
  if (o.no_separator) return std::nullopt;
  if (!o.separator.empty()) {
    const auto id = tokenizer.token_id(o.separator);
    if (!id) throw usage_error("--separator: '" + o.separator + "' is not a token of " + o.tokenizer);
    return id;
  }
  const auto id = tokenizer.end_of_text();
  if (!id) {
    throw usage_error(o.tokenizer + " has no end-of-text token to put between documents",
                      "name one with --separator TOKEN, or give --no-separator");
  }
  return id;
}

void check_output_directory(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw usage_error("cannot create " + out.string() + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with("train_") || name.starts_with("val_")) && name.ends_with(".bin")) {
      throw usage_error(out.string() + " already holds token shards (" + name + ")",
                        "choose another --out, or remove the shards first");
    }
  }
}

// Encodes each document on `threads` threads, each id list in its document's place.
std::vector<std::vector<TokenId>> encode_all(const Tokenizer& tokenizer, const std::vector<TextDocument>& documents,
                                             int threads) {
  std::vector<std::vector<TokenId>> ids(documents.size());
  std::vector<std::exception_ptr> failures(documents.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < documents.size(); i = next++) {
      try {
        ids[i] = tokenizer.encode(documents[i].text);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  const std::size_t helpers = std::min<std::size_t>(static_cast<std::size_t>(threads), documents.size()) - 1;
  for (std::size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (std::size_t i = 0; i < documents.size(); ++i) {
    if (!failures[i]) continue;
    try {
      std::rethrow_exception(failures[i]);
    } catch (const Error& e) {
      throw runtime_error(documents[i].where + ": " + e.message(), e.hint());
    }
  }
  return ids;
}

class Progress {
 public:
  explicit Progress(std::uintmax_t total_bytes) : total_(total_bytes), shown_(::isatty(2) != 0) {}
  void update(std::uintmax_t bytes, std::int64_t tokens) {
    if (!shown_) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const double percent = total_ ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total_) : 100.0;
    const int filled = static_cast<int>(percent / 5);
    std::fprintf(stderr, "\rtokenize [%-20s] %3.0f%%  %s tokens, %.0f tokens/s ", std::string(filled, '#').c_str(),
                 percent, with_thousands(tokens).c_str(), seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0);
  }
  void done() {
    if (shown_) std::fprintf(stderr, "\n");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_ = Clock::now();
  std::uintmax_t total_;
  bool shown_;
};

std::string listed(const std::vector<fs::path>& files) {
  std::string text = "[";
  for (std::size_t i = 0; i < files.size(); ++i) text.append(i ? ", " : "").append(files[i].string());
  return text + "]";
}

}  // namespace

int tokenize(const TokenizeOptions& o) {
  if (o.val_fraction < 0 || o.val_fraction >= 1) throw usage_error("--val-fraction must be in [0, 1)");
  if (o.shard_tokens < 1 || o.shard_tokens >= (std::int64_t{1} << 31)) {
    throw usage_error("--shard-tokens must be from 1 to 2^31 - 1 (llm.c's header counts tokens in an int32)");
  }
  if (o.threads < 0) throw usage_error("--threads must be 1 or more (0: every core)");
  if (o.no_separator && !o.separator.empty()) throw usage_error("give --separator or --no-separator, not both");
  const auto tokenizer = load_tokenizer(o.tokenizer);
  const std::optional<TokenId> separator = separator_of(o, *tokenizer);
  TextDocuments documents(o.inputs, o.field);
  check_output_directory(o.out);
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int width = tokenizer->vocab_size() <= 65536 ? 2 : 4;
  install_interrupt_handlers("mixt tokenize: stopping; no shard is written (again to quit at once)");

  TokenSpool spool(fs::path(o.out) / ".tokenize-spool.tmp");
  Progress progress(documents.total_bytes());
  std::int64_t document_count = 0;
  std::int64_t text_tokens = 0;  // without the separators: shards of separators alone train nothing
  std::vector<TextDocument> batch;
  while (documents.next(batch, kBatchDocuments, kBatchBytes)) {
    for (const std::vector<TokenId>& ids : encode_all(*tokenizer, batch, threads)) {
      if (separator) spool.append(std::span<const TokenId>(&*separator, 1));
      spool.append(ids);
      text_tokens += static_cast<std::int64_t>(ids.size());
    }
    document_count += static_cast<std::int64_t>(batch.size());
    batch.clear();
    progress.update(documents.bytes_read(), spool.count());
    if (interrupt_requested()) throw Error(ErrorKind::interrupted, "interrupted: no shard was written");
  }
  progress.done();
  const double seconds = progress.seconds();
  if (text_tokens == 0) {
    throw usage_error("the inputs hold no text to tokenize (" + with_thousands(document_count) + " empty document" +
                      (document_count == 1 ? "" : "s") + ")");
  }
  auto val_tokens = static_cast<std::int64_t>(std::llround(o.val_fraction * static_cast<double>(spool.count())));
  if (o.val_fraction > 0 && spool.count() > 1) val_tokens = std::clamp<std::int64_t>(val_tokens, 1, spool.count() - 1);
  const std::int64_t total = spool.count();
  const WrittenShards shards = write_llmc_shards(spool, o.out, width, o.shard_tokens, val_tokens);

  const double megabytes = static_cast<double>(documents.bytes_read()) / 1e6;
  const auto per_second = static_cast<std::int64_t>(static_cast<double>(total) / std::max(seconds, 1e-9));
  std::printf("tokenized %s document%s (%.2f MB) into %s tokens in %.2f s: %s tokens/s, %.2f MB/s, %d thread%s\n",
              with_thousands(document_count).c_str(), document_count == 1 ? "" : "s", megabytes,
              with_thousands(total).c_str(), seconds, with_thousands(per_second).c_str(),
              megabytes / std::max(seconds, 1e-9), threads, threads == 1 ? "" : "s");
  std::printf("train: %s tokens in %s\n", with_thousands(total - val_tokens).c_str(), listed(shards.train).c_str());
  if (!shards.val.empty()) {
    std::printf("val: %s tokens in %s\n", with_thousands(val_tokens).c_str(), listed(shards.val).c_str());
  }
  const std::string vocab = std::to_string(tokenizer->vocab_size());
  std::string data = "data: {train: {name: tokens, files: " + listed(shards.train) + ", vocab: " + vocab + "}";
  if (!shards.val.empty()) data.append(", val: {name: tokens, files: ").append(listed(shards.val)).append(", vocab: ");
  if (!shards.val.empty()) data.append(vocab).append("}");
  std::printf("%s ids (llm.c format); in a recipe: %s}\n", width == 2 ? "uint16" : "uint32", data.c_str());
  return 0;
}

void add_tokenize_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", "text files or JSONL records to llm.c token shards");
  command->add_option("inputs", o->inputs, "text files (each one document) or .jsonl files (a document per line)")
      ->required();
  command->add_option("--tokenizer", o->tokenizer, "a tokenizer.json (Hugging Face) or tokenizer.model (SentencePiece)")
      ->required();
  command->add_option("-o,--out", o->out, "the folder for train_NNNNNN.bin and val_NNNNNN.bin")->required();
  command->add_option("--field", o->field, "the key of each .jsonl record that holds its text")->capture_default_str();
  command->add_option("--val-fraction", o->val_fraction, "the share of the tokens, the stream's last, kept for val")
      ->capture_default_str();
  command->add_option("--shard-tokens", o->shard_tokens, "tokens per file at most (llm.c's 100M)")
      ->capture_default_str();
  command->add_option("--threads", o->threads, "encoding threads (0: every core); the shards are the same for any")
      ->capture_default_str();
  command->add_option("--separator", o->separator,
                      "the token put before each document (default: the tokenizer's end-of-text token)");
  command->add_flag("--no-separator", o->no_separator, "documents run into each other, no token between");
  commands.push_back({command, [o] { return tokenize(*o); }});
}

}  // namespace mixt::cli
