// Fuzz target: a SentencePiece model, tokenizer.model (mixt::text::read_sentencepiece_model,
// libsentencepiece's protobuf reader and normalizer behind it) and a text it encodes.
// Input: one byte, the text's length L, then the text's L bytes, then the model (a protobuf
// holds NULs, so no separator can end it). What must hold:
//   - the reader accepts or refuses with a mixt::Error;
//   - every id encode() gives is below vocab_size();
//   - decode() takes those ids back without throwing, and its text is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "mixt/error.h"
#include "sdk/tokenizer/sentencepiece_tokenizer.h"
#include "sdk/tokenizer/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string_view text = input.substr(0, data[0]);
  const std::string_view model = input.substr(text.size());
  std::unique_ptr<mixt::Tokenizer> tokenizer;
  try {
    tokenizer = mixt::text::read_sentencepiece_model("fuzz/tokenizer.model", model);
  } catch (const mixt::Error&) {
    return 0;
  }
  std::vector<mixt::TokenId> ids;
  try {
    ids = tokenizer->encode(text, true);
  } catch (const mixt::Error&) {
    return 0;  // a text that is not UTF-8
  }
  for (const mixt::TokenId id : ids) {
    MIXT_FUZZ_CHECK(id >= 0 && id < tokenizer->vocab_size(), "encode gave an id outside the vocabulary");
  }
  const std::string decoded = tokenizer->decode(ids);
  MIXT_FUZZ_CHECK(!mixt::text::first_invalid_utf8(decoded), "decode wrote invalid UTF-8");
  return 0;
}
