// A SentencePiece model (tokenizer.model of older Llamas) through libsentencepiece, the
// library the `sentencepiece` Python package wraps.
//
// Debian's libsentencepiece carries its own copy of protobuf-lite and exports it: loaded
// with libmixt, that copy would stand in for the system protobuf the tensorboard plugin links
// (and crash it). So it lives in a module of its own, lib/mixt/libmixt_sentencepiece.so,
// opened on first use with RTLD_LOCAL | RTLD_DEEPBIND: its symbols stay out of the process's
// global scope, and its protobuf calls bind to its own copy.
#pragma once

#include <mixt/tokenizer.h>

#include <memory>
#include <string>
#include <string_view>

namespace mixt::text {

// `content` is the serialized model; `file` names it in errors. Throws mixt::Error when
// libsentencepiece cannot read it, or the module is missing. (In libmixt: it opens the module.)
std::unique_ptr<Tokenizer> read_sentencepiece_model(const std::string& file, std::string_view content);

// The module's entry point: a Tokenizer in *out, or the reason in *failure.
using ReadSentencePieceModel = void (*)(const std::string& file, std::string_view content,
                                        std::unique_ptr<Tokenizer>* out, std::string* failure);
inline constexpr const char* kSentencePieceEntry = "mixt_read_sentencepiece_model";

}  // namespace mixt::text
