// `mixt tokenize`'s output: the whole token stream is spooled to a temporary file (so the
// val split can be the stream's last tokens, as nanoGPT's prepare.py makes it, in bounded
// memory), then written as llm.c shards: 256 int32 of header (magic, version, token
// count) and the ids, uint16 (magic 20240520, version 1) or uint32 (20240801, version 7)
// as llm.c's dev/data/data_common.py writes them.
#pragma once

#include <mixt/tokenizer.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

namespace mixt::cli {

// uint32 ids appended to `file`, removed when the spool goes.
class TokenSpool {
 public:
  explicit TokenSpool(std::filesystem::path file);
  ~TokenSpool();
  TokenSpool(const TokenSpool&) = delete;
  TokenSpool& operator=(const TokenSpool&) = delete;

  void append(std::span<const TokenId> ids);
  std::int64_t count() const { return count_; }
  const std::filesystem::path& file() const { return file_; }
  void close_for_reading();

 private:
  std::filesystem::path file_;
  std::ofstream out_;
  std::int64_t count_ = 0;
};

struct WrittenShards {
  std::vector<std::filesystem::path> train;
  std::vector<std::filesystem::path> val;
};

// Writes the spool's first count - val_tokens ids as train_NNNNNN.bin and the rest as
// val_NNNNNN.bin in `directory`, at most `shard_tokens` per file, each file whole or not at all.
WrittenShards write_llmc_shards(TokenSpool& spool, const std::filesystem::path& directory, int width,
                                std::int64_t shard_tokens, std::int64_t val_tokens);

}  // namespace mixt::cli
