// mixt/tokenizer.h — text to token ids and back, as the language models' own tokenizers do.
//
// Two kinds of file, the ones language models ship with:
//   tokenizer.json   Hugging Face tokenizers' format (GPT-2, Llama 3, Qwen, SmolLM, Mistral):
//                    byte-level BPE with its pre-tokenizer (ByteLevel, Split with a regex,
//                    Sequence, Digits), added and special tokens, the ByteLevel decoder and
//                    the TemplateProcessing post-processor. Ids equal the `tokenizers` package's.
//   tokenizer.model  a SentencePiece model (older Llamas), through libsentencepiece.
//
//   auto tokenizer = mixt::load_tokenizer("tokenizer.json");
//   std::vector<mixt::TokenId> ids = tokenizer->encode("Hello, world");
//   std::string text = tokenizer->decode(ids);
//
// A tokenizer is immutable once loaded: encode and decode may run on many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mixt {

using TokenId = std::int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text` (UTF-8; invalid UTF-8 is a mixt::Error naming the byte). Special tokens
  // written in the text ("<|endoftext|>") are matched whole, never split, as `tokenizers` does
  // by default. add_special_tokens: also what the tokenizer adds around a text (Llama 3's
  // <|begin_of_text|>, SentencePiece's BOS), as `encode(text, add_special_tokens=True)`.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = false) const = 0;

  // The text of `ids`; skip_special_tokens leaves out the special ones. Ids the vocabulary does
  // not hold are left out. Bytes that are not whole UTF-8 characters become U+FFFD.
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const = 0;
  // The same without the U+FFFD repair: the bytes as they are (for streaming, TextStream).
  virtual std::string decode_bytes(std::span<const TokenId> ids) const = 0;

  // One more than the largest id: the size a model's embedding needs.
  virtual std::int64_t vocab_size() const = 0;
  // The id of one token (a vocabulary entry or an added token), if there is one.
  virtual std::optional<TokenId> token_id(std::string_view token) const = 0;
  // The token that ends a document ("<|endoftext|>", "<|end_of_text|>", "</s>"), if it has one.
  virtual std::optional<TokenId> end_of_text() const = 0;
  // One line for people: "byte-level BPE, 50257 tokens (tokenizer.json)".
  virtual std::string describe() const = 0;
};

// Reads a tokenizer.json or a SentencePiece model, told apart by their content. A file that
// cannot be used (missing, truncated, an unsupported part, a merge naming a missing token, a
// token over 64 KiB, a file over 256 MiB) is a mixt::Error naming it and what is wrong, after
// bounded time and memory.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file);

// Decoded text of ids as they arrive, for printing while a model samples: each push returns
// the text that is now complete (a character split across tokens waits for its last byte).
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(TokenId id);
  // Whatever is left, incomplete characters as U+FFFD.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::vector<TokenId> ids_;
  std::size_t emitted_ = 0;  // bytes of decode_bytes(ids_) already returned
};

}  // namespace mixt
