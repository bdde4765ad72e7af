// `mixt tokenize`: text files or JSONL records to llm.c token shards, with a tokenizer.json
// or a SentencePiece model (mixt/tokenizer.h), on many threads, the same shards whatever
// their number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // text files (a document each) or .jsonl files (a document per line)
  std::string tokenizer;
  std::string out;
  std::string field = "text";               // the .jsonl records' text
  double val_fraction = 0.1;                // the stream's last tokens, as nanoGPT's prepare.py splits
  std::int64_t shard_tokens = 100'000'000;  // llm.c's shard size
  int threads = 0;                          // 0: every core
  std::string separator;                    // "" : the tokenizer's end-of-text token
  bool no_separator = false;
};

int tokenize(const TokenizeOptions& options);
void add_tokenize_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
