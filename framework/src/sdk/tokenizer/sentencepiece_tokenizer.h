// A SentencePiece model (tokenizer.model of older Llamas) through libsentencepiece, the
// library the `sentencepiece` Python package wraps.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <mixt/tokenizer.h>

namespace mixt::text {

// `content` is the serialized model; `file` names it in errors. Throws mixt::Error when
// libsentencepiece cannot read it.
std::unique_ptr<Tokenizer> read_sentencepiece_model(const std::string& file, std::string_view content);

}  // namespace mixt::text
