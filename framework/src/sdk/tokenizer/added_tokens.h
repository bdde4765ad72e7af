// A tokenizer's added tokens ("<|endoftext|>", "<|begin_of_text|>", user additions): found in
// the text before anything else runs, leftmost and then longest first, and never split.
#pragma once

#include <mixt/tokenizer.h>

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mixt::text {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;      // left out by decode(skip_special_tokens)
  bool single_word = false;  // matched only where no word character touches it
  bool lstrip = false;       // takes the whitespace before it
  bool rstrip = false;       // takes the whitespace after it
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // Walks `text`: on_text for each stretch between added tokens (never empty), on_token for each.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(TokenId)>& on_token) const;

  const AddedToken* by_id(TokenId id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& all() const { return tokens_; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::size_t>> children;
    int token = -1;  // index into tokens_ of the token ending here
  };
  // The index of the longest token starting at text[at], and its end; -1 when none.
  int longest_at(std::string_view text, std::size_t at, std::size_t& end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_{Node{}};
  std::array<bool, 256> starts_{};  // the first bytes of the tokens: the scan skips every other byte at once
  std::unordered_map<TokenId, std::size_t> by_id_;
};

}  // namespace mixt::text
