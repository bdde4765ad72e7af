// Fuzz target: a tokenizer.json (mixt::text::read_tokenizer_json) and a text it encodes.
// Input: the file's bytes, a NUL, then the text. What must hold:
//   - the reader accepts or refuses with a mixt::Error (any other exception is a bug);
//   - every id encode() gives is below vocab_size();
//   - decode() and decode_bytes() take those ids back without throwing, decode()'s text is
//     valid UTF-8 (a partial byte sequence becomes U+FFFD, never raw bytes).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "mixt/error.h"
#include "sdk/tokenizer/tokenizer_json.h"
#include "sdk/tokenizer/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string_view file = input.substr(0, split);
  // Texts are kept short: the reader, not a long encode, is what this target explores.
  const std::string_view text = split == std::string_view::npos ? std::string_view() : input.substr(split + 1, 512);
  std::unique_ptr<mixt::Tokenizer> tokenizer;
  try {
    tokenizer = mixt::text::read_tokenizer_json("fuzz/tokenizer.json", file);
  } catch (const mixt::Error&) {
    return 0;  // refused in words: what a bad file must get
  }
  std::vector<mixt::TokenId> ids;
  try {
    ids = tokenizer->encode(text, true);
  } catch (const mixt::Error&) {
    return 0;  // a text the tokenizer cannot encode (an unknown character without <unk>)
  }
  for (const mixt::TokenId id : ids) {
    MIXT_FUZZ_CHECK(id >= 0 && id < tokenizer->vocab_size(), "encode gave an id outside the vocabulary");
  }
  const std::string decoded = tokenizer->decode(ids);
  MIXT_FUZZ_CHECK(!mixt::text::first_invalid_utf8(decoded), "decode wrote invalid UTF-8");
  (void)tokenizer->decode_bytes(ids);
  return 0;
}
