#include "added_tokens.h"

#include <cctype>

namespace mixt::text {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// A letter, digit or underscore, or any byte of a non-ASCII character (which single_word
// treats as part of a word).
bool is_word_byte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte >= 0x80 || std::isalnum(byte) != 0 || c == '_';
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    by_id_[tokens_[t].id] = t;
    if (tokens_[t].content.empty()) continue;
    starts_[static_cast<unsigned char>(tokens_[t].content.front())] = true;
    std::size_t node = 0;
    for (char c : tokens_[t].content) {
      const auto byte = static_cast<unsigned char>(c);
      std::size_t child = 0;
      for (const auto& [edge, index] : trie_[node].children) {
        if (edge == byte) child = index;
      }
      if (child == 0) {
        child = trie_.size();
        trie_[node].children.emplace_back(byte, child);
        trie_.emplace_back();
      }
      node = child;
    }
    trie_[node].token = static_cast<int>(t);
  }
}

int AddedTokens::longest_at(std::string_view text, std::size_t at, std::size_t& end) const {
  int found = -1;
  std::size_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    std::size_t child = 0;
    for (const auto& [edge, index] : trie_[node].children) {
      if (edge == static_cast<unsigned char>(text[i])) child = index;
    }
    if (child == 0) break;
    node = child;
    if (trie_[node].token >= 0) {
      found = trie_[node].token;
      end = i + 1;
    }
  }
  return found;
}

void AddedTokens::split(std::string_view text, const std::function<void(std::string_view)>& on_text,
                        const std::function<void(TokenId)>& on_token) const {
  std::size_t stretch = 0;  // where the text not yet passed on starts
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = 0;
    const int index = starts_[static_cast<unsigned char>(text[at])] ? longest_at(text, at, end) : -1;
    if (index < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<std::size_t>(index)];
    if (token.single_word &&
        ((at > 0 && is_word_byte(text[at - 1])) || (end < text.size() && is_word_byte(text[end])))) {
      ++at;
      continue;
    }
    std::size_t begin = at;
    if (token.lstrip) {
      while (begin > stretch && is_space(text[begin - 1])) --begin;
    }
    if (token.rstrip) {
      while (end < text.size() && is_space(text[end])) ++end;
    }
    if (begin > stretch) on_text(text.substr(stretch, begin - stretch));
    on_token(token.id);
    stretch = at = end;
  }
  if (stretch < text.size()) on_text(text.substr(stretch));
}

const AddedToken* AddedTokens::by_id(TokenId id) const {
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : &tokens_[found->second];
}

const AddedToken* AddedTokens::by_content(std::string_view content) const {
  std::size_t end = 0;
  const int index = content.empty() ? -1 : longest_at(content, 0, end);
  return index >= 0 && end == content.size() ? &tokens_[static_cast<std::size_t>(index)] : nullptr;
}

}  // namespace mixt::text
