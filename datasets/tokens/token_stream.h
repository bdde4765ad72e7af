// Token files (or a text's bytes) read in order as one stream of token ids: shards are
// concatenated, so a window may run from the end of one file into the next, as it runs
// from one document into the next inside a file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tokens {

// One file's tokens: `count` ids of `width` bytes (1: text bytes, 2: uint16, 4: uint32; little-endian)
// starting `header_bytes` into the file, at `bytes` in memory.
struct TokenRun {
  std::string file;
  const std::uint8_t* bytes = nullptr;
  int width = 2;
  std::int64_t count = 0;
  std::int64_t header_bytes = 0;
  std::shared_ptr<const void> owner;  // keeps `bytes` alive (a mapping, a buffer)
};

class TokenStream {
 public:
  explicit TokenStream(std::vector<TokenRun> runs);

  std::int64_t size() const { return total_; }
  // Tokens [start, start + count) of the stream, widened to int64, into `out`.
  void copy(std::int64_t start, std::int64_t count, std::int64_t* out) const;
  // Where token `position` of the stream is, for messages: "FILE, token K (byte B)".
  std::string locate(std::int64_t position) const;
  // The files, for messages: "a.bin", "a.bin and b.bin", "a.bin ... z.bin (12 files)".
  std::string files() const;

 private:
  std::size_t run_of(std::int64_t position) const;

  std::vector<TokenRun> runs_;
  std::vector<std::int64_t> firsts_;  // stream position of each run's first token
  std::int64_t total_ = 0;
};

}  // namespace tokens
