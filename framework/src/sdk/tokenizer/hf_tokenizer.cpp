#include "hf_tokenizer.h"

#include <mixt/error.h>

#include <algorithm>

#include "utf8.h"

namespace mixt::text {

namespace {

// The names models end documents with, most common first.
constexpr const char* kEndOfTextNames[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>"};

}  // namespace

HfTokenizer::HfTokenizer(HfTokenizerParts parts) : parts_(std::move(parts)) {
  for (const auto& [token, id] : parts_.model->vocabulary()) vocab_size_ = std::max<std::int64_t>(vocab_size_, id + 1);
  for (const AddedToken& token : parts_.added.all()) vocab_size_ = std::max<std::int64_t>(vocab_size_, token.id + 1);
  for (const char* name : kEndOfTextNames) {
    if (const AddedToken* token = parts_.added.by_content(name)) {
      end_of_text_ = token->id;
      break;
    }
  }
}

std::vector<TokenId> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = first_invalid_utf8(text)) {
    throw runtime_error("text to encode is not UTF-8: byte " + std::to_string(*bad) + " does not start a character");
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  parts_.added.split(
      text,
      [&](std::string_view stretch) {
        const auto tokenize = [&](std::string_view piece) { parts_.model->tokenize(piece, ids); };
        if (!parts_.normalizer && parts_.pre_tokenizer && parts_.pre_tokenizer->stream(stretch, tokenize)) return;
        Pieces pieces{{std::string(stretch), stretch.data() == text.data()}};
        if (parts_.normalizer) pieces.front().text = parts_.normalizer->normalize(std::move(pieces.front().text));
        if (parts_.pre_tokenizer) pieces = parts_.pre_tokenizer->split(std::move(pieces));
        for (const Piece& piece : pieces) parts_.model->tokenize(piece.text, ids);
      },
      [&](TokenId id) { ids.push_back(id); });
  if (!add_special_tokens || parts_.template_single.empty()) return ids;
  std::vector<TokenId> framed;
  framed.reserve(ids.size() + 4);
  for (const TemplatePart& part : parts_.template_single) {
    const std::vector<TokenId>& source = part.is_text ? ids : part.ids;
    framed.insert(framed.end(), source.begin(), source.end());
  }
  return framed;
}

std::vector<std::string> HfTokenizer::tokens_of(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const TokenId id : ids) {
    if (const AddedToken* added = parts_.added.by_id(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
    } else if (const std::string* known = parts_.model->token_of(id)) {
      tokens.push_back(*known);
    }
  }
  return tokens;
}

std::string HfTokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens = tokens_of(ids, skip_special_tokens);
  std::string text;
  if (!parts_.decoder) {
    for (std::size_t i = 0; i < tokens.size(); ++i) text.append(i ? " " : "").append(tokens[i]);
  } else {
    for (const std::string& piece : parts_.decoder->decode(std::move(tokens))) text += piece;
  }
  return repair_utf8(text);
}

std::string HfTokenizer::decode_bytes(std::span<const TokenId> ids) const {
  if (!parts_.byte_level_decoder) return decode(ids, false);
  return ByteLevelDecoder(/*lossy=*/false).decode(tokens_of(ids, false)).front();
}

std::optional<TokenId> HfTokenizer::token_id(std::string_view token) const {
  if (const AddedToken* added = parts_.added.by_content(token)) return added->id;
  const auto found = parts_.model->vocabulary().find(token);
  if (found == parts_.model->vocabulary().end()) return std::nullopt;
  return found->second;
}

std::string HfTokenizer::describe() const {
  return std::string(parts_.byte_level_decoder ? "byte-level BPE" : "BPE") + ", " + std::to_string(vocab_size_) +
         " tokens (" + parts_.file + ")";
}

}  // namespace mixt::text
