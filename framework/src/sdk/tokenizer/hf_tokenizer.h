// A tokenizer.json tokenizer: added tokens, then the pre-tokenizer, then BPE; the decoder and
// post-processor it names. Built by read_tokenizer_json (tokenizer_json.h).
#pragma once

#include <mixt/tokenizer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "added_tokens.h"
#include "bpe_model.h"
#include "decoder.h"
#include "normalizer.h"
#include "pre_tokenizer.h"

namespace mixt::text {

// One part of TemplateProcessing's `single`: the text's ids, or fixed special ids.
struct TemplatePart {
  bool is_text = false;
  std::vector<TokenId> ids;
};

struct HfTokenizerParts {
  std::string file;
  AddedTokens added;
  std::unique_ptr<Normalizer> normalizer;       // null: the text as it is
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: each stretch of text is one piece
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<DecoderStep> decoder;       // null: tokens joined by spaces, as tokenizers does
  bool byte_level_decoder = false;            // the decoder is ByteLevel alone: decode_bytes keeps raw bytes
  std::vector<TemplatePart> template_single;  // empty: add_special_tokens adds nothing
};

class HfTokenizer : public Tokenizer {
 public:
  explicit HfTokenizer(HfTokenizerParts parts);

  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = false) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const override;
  std::string decode_bytes(std::span<const TokenId> ids) const override;
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::optional<TokenId> token_id(std::string_view token) const override;
  std::optional<TokenId> end_of_text() const override { return end_of_text_; }
  std::string describe() const override;

 private:
  std::vector<std::string> tokens_of(std::span<const TokenId> ids, bool skip_special_tokens) const;

  HfTokenizerParts parts_;
  std::int64_t vocab_size_ = 0;
  std::optional<TokenId> end_of_text_;
};

}  // namespace mixt::text
