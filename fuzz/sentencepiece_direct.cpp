// The clang build's read_sentencepiece_model: libmixt opens its SentencePiece module with
// RTLD_DEEPBIND, which AddressSanitizer refuses, so here the module's entry is linked in and
// called directly (with the same refusal sentencepiece_loader.cpp words).
#include <mixt/error.h>

#include "sdk/tokenizer/sentencepiece_tokenizer.h"

extern "C" void mixt_read_sentencepiece_model(const std::string& file, std::string_view content,
                                              std::unique_ptr<mixt::Tokenizer>* out, std::string* failure);

namespace mixt::text {

std::unique_ptr<Tokenizer> read_sentencepiece_model(const std::string& file, std::string_view content) {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string failure;
  mixt_read_sentencepiece_model(file, content, &tokenizer, &failure);
  if (!tokenizer) throw recipe_error("not a SentencePiece model (" + failure + ")", SourceLocation{file});
  return tokenizer;
}

}  // namespace mixt::text
