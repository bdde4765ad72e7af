// Reads Hugging Face tokenizers' tokenizer.json into an HfTokenizer: what mixt supports of
// the format, and a mixt::Error at the key of whatever it does not.
#pragma once

#include <mixt/tokenizer.h>

#include <memory>
#include <string>
#include <string_view>

namespace mixt::text {

// Tokens longer than this are refused (real vocabularies stay under a few hundred bytes).
constexpr std::size_t kMaxTokenBytes = 64 * 1024;

// `content` is the file's text; `file` names it in errors.
std::unique_ptr<Tokenizer> read_tokenizer_json(const std::string& file, std::string_view content);

}  // namespace mixt::text
