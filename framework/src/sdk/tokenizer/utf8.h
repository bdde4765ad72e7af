// UTF-8 as the tokenizers need it: checking text, appending code points, and the lossy
// repair Rust's String::from_utf8_lossy does (each maximal invalid subpart becomes U+FFFD),
// which is what Hugging Face tokenizers' decode returns.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mixt::text {

// The byte offset of the first byte that is not part of a well-formed UTF-8 character.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

void append_utf8(std::string& out, char32_t code_point);

// Bytes of the well-formed character starting at text[at], or 0 when none starts there.
std::size_t utf8_char_size(std::string_view text, std::size_t at);

// The length of the longest prefix of `bytes` that ends on a character boundary, leaving out
// a trailing character that could still be completed by more bytes.
std::size_t complete_utf8_prefix(std::string_view bytes);

std::string repair_utf8(std::string_view bytes);

}  // namespace mixt::text
