// The BPE model of tokenizer.json: a vocabulary and ranked merges, applied to one
// pre-tokenized piece at a time (lowest rank first, leftmost first among equals), with a
// per-thread cache of the pieces already seen.
#pragma once

#include <mixt/tokenizer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "pair_table.h"
#include <vector>

namespace mixt::text {

// Heterogeneous lookup: find a std::string key with a std::string_view, no copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocabulary = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;  // unknown characters as their <0xAB> byte tokens
  bool ignore_merges = false;  // a piece that is a whole token is that token (Llama 3)
};

struct Merge {
  std::string left;
  std::string right;
};

class BpeModel {
 public:
  // Throws std::invalid_argument naming the merge (by index) that names a missing token.
  BpeModel(Vocabulary vocabulary, const std::vector<Merge>& merges, BpeOptions options);

  // Appends the ids of one piece to `out`.
  void tokenize(std::string_view piece, std::vector<TokenId>& out) const;

  const Vocabulary& vocabulary() const { return vocabulary_; }
  // The token of `id`, or nothing when no token has it.
  const std::string* token_of(TokenId id) const;

 private:
  static std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  void merge_word(std::string_view piece, std::vector<TokenId>& out) const;
  static constexpr std::size_t kShortPiece = 32;  // symbols merged by merge_short's scan
  void merge_short(std::vector<TokenId>& ids, std::vector<TokenId>& out) const;
  void append_symbols(std::string_view piece, std::vector<TokenId>& symbols, std::vector<std::size_t>& sizes) const;

  Vocabulary vocabulary_;
  std::vector<const std::string*> tokens_;  // id -> token (null for unused ids)
  PairTable merges_;
  BpeOptions options_;
  std::optional<TokenId> unk_id_;
  std::vector<std::optional<TokenId>> byte_ids_;  // <0x00>..<0xFF>, when byte_fallback
  std::uint64_t serial_;                          // tells this model's cache entries from another's
};

}  // namespace mixt::text
