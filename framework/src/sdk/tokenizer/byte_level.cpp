#include "byte_level.h"

#include <array>
#include <optional>

#include "utf8.h"

namespace mixt::text {

namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> encoded;     // byte -> UTF-8 of its character
  std::array<std::int16_t, 324> decoded{};  // code point -> byte, -1 when not in the alphabet

  Alphabet() {
    decoded.fill(-1);
    int next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const int code_point = stands_for_itself(byte) ? byte : next++;
      append_utf8(encoded[static_cast<std::size_t>(byte)], static_cast<char32_t>(code_point));
      decoded[static_cast<std::size_t>(code_point)] = static_cast<std::int16_t>(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

// The code point of the character at token[at] (its size in `size`), for characters of at
// most two bytes (the alphabet's); nothing for any other.
std::optional<char32_t> alphabet_char(std::string_view token, std::size_t at, std::size_t& size) {
  const auto lead = static_cast<unsigned char>(token[at]);
  if (lead < 0x80) {
    size = 1;
    return lead;
  }
  if (lead >= 0xC2 && lead <= 0xDF && at + 1 < token.size()) {
    const auto next = static_cast<unsigned char>(token[at + 1]);
    if ((next & 0xC0) != 0x80) return std::nullopt;
    size = 2;
    return static_cast<char32_t>(((lead & 0x1F) << 6) | (next & 0x3F));
  }
  return std::nullopt;
}

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  const Alphabet& a = alphabet();
  // Written in place: every character of the alphabet is below U+0800, two bytes at most (an
  // append a byte was a memcpy call a byte, a sixth of the encoding time).
  const std::size_t start = out.size();
  out.resize(start + 2 * bytes.size());
  char* at = out.data() + start;
  for (char byte : bytes) {
    const std::string& encoded = a.encoded[static_cast<unsigned char>(byte)];
    at[0] = encoded[0];
    if (encoded.size() == 2) at[1] = encoded[1];
    at += encoded.size();
  }
  out.resize(static_cast<std::size_t>(at - out.data()));
}

void append_byte_level_decoded(std::string& out, std::string_view token) {
  const Alphabet& a = alphabet();
  const std::size_t start = out.size();
  std::size_t at = 0;
  while (at < token.size()) {
    std::size_t size = 0;
    const std::optional<char32_t> c = alphabet_char(token, at, size);
    if (!c || *c >= a.decoded.size() || a.decoded[*c] < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(a.decoded[*c]));
    at += size;
  }
}

}  // namespace mixt::text
