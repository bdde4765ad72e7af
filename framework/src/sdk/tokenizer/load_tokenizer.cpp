// load_tokenizer and TextStream (mixt/tokenizer.h).
#include <mixt/error.h>
#include <mixt/tokenizer.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "sentencepiece_tokenizer.h"
#include "tokenizer_json.h"
#include "utf8.h"

namespace mixt {

namespace {

// The largest real tokenizer.json files are tens of MB (Gemma's ~33 MB); far past that is
// a wrong file, refused before it is read.
constexpr std::uintmax_t kMaxTokenizerFileBytes = 256ull << 20;

std::string read_whole(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    throw recipe_error("tokenizer file does not exist", SourceLocation{file.string()}, {},
                       "give a tokenizer.json (Hugging Face) or a tokenizer.model (SentencePiece)");
  }
  if (std::filesystem::is_directory(file, ec)) {
    throw recipe_error("is a folder, not a tokenizer file", SourceLocation{file.string()}, {},
                       "name the tokenizer.json or tokenizer.model inside it");
  }
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw recipe_error("cannot read: " + ec.message(), SourceLocation{file.string()});
  if (size > kMaxTokenizerFileBytes) {
    throw recipe_error(std::to_string(size >> 20) + " MiB, more than any tokenizer (at most " +
                           std::to_string(kMaxTokenizerFileBytes >> 20) + " MiB are read)",
                       SourceLocation{file.string()});
  }
  std::ifstream in(file, std::ios::binary);
  std::string content(static_cast<std::size_t>(size), '\0');
  if (!in || !in.read(content.data(), static_cast<std::streamsize>(size))) {
    throw recipe_error(std::string("cannot read: ") + std::strerror(errno), SourceLocation{file.string()});
  }
  return content;
}

bool looks_like_json(std::string_view content) {
  const std::size_t first = content.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && content[first] == '{';
}

// Whether `id` is a byte-fallback token (<0x00> .. <0xFF>, Llama 2's and SentencePiece's): a
// run of them decodes as one group (U+FFFD for each when the group is not UTF-8), so its text
// is final only once a token of another kind ends the run. Byte tokens decode alone to one
// ASCII character or U+FFFD, which spares the lookups for every other token.
bool is_byte_token(const Tokenizer& tokenizer, TokenId id) {
  if (tokenizer.decode(std::span<const TokenId>(&id, 1)).size() > 3) return false;
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    if (tokenizer.token_id(name) == id) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file) {
  const std::string content = read_whole(file);
  if (looks_like_json(content)) return text::read_tokenizer_json(file.string(), content);
  return text::read_sentencepiece_model(file.string(), content);
}

std::string TextStream::push(TokenId id) {
  ids_.push_back(id);
  if (is_byte_token(tokenizer_, id)) return {};
  const std::string bytes = tokenizer_.decode_bytes(ids_);
  std::size_t ready = text::complete_utf8_prefix(bytes);
  // SentencePiece writes each byte of an unfinished character as U+FFFD at once: hold those back too.
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  while (std::string_view(bytes).substr(0, ready).ends_with(kReplacement)) ready -= kReplacement.size();
  if (ready <= emitted_) return {};
  // Bytes that can never complete a character (a model may draw any token after a partial
  // one) become U+FFFD as transformers' decode writes them: the stream stays valid UTF-8.
  std::string out = text::repair_utf8(std::string_view(bytes).substr(emitted_, ready - emitted_));
  emitted_ = ready;
  return out;
}

std::string TextStream::finish() {
  const std::string bytes = tokenizer_.decode_bytes(ids_);
  const std::string rest = bytes.size() > emitted_ ? text::repair_utf8(std::string_view(bytes).substr(emitted_)) : "";
  emitted_ = bytes.size();
  return rest;
}

}  // namespace mixt
