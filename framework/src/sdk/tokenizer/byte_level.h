// GPT-2's byte-level alphabet: each of the 256 bytes as a printable character (bytes that
// are printable Latin-1 stand for themselves, the others for U+0100 onwards, in order), so
// that a BPE over characters covers any byte string.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace mixt::text {

// `bytes` with each byte replaced by its character, appended to `out` (UTF-8).
void append_byte_level(std::string& out, std::string_view bytes);

// Tokens back to bytes, as the ByteLevel decoder does: a token whose every character is one
// of the alphabet gives their bytes, any other token (an added one such as "<|x y|>") its
// own UTF-8 bytes.
void append_byte_level_decoded(std::string& out, std::string_view token);

}  // namespace mixt::text
