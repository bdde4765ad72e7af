#include "utf8.h"

namespace mixt::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(unsigned char byte, unsigned char low = 0x80, unsigned char high = 0xBF) {
  return byte >= low && byte <= high;
}

struct Lead {
  std::size_t size = 0;             // 0: not a lead byte
  unsigned char second_low = 0x80;  // the range the second byte must fall in (Unicode table 3-7)
  unsigned char second_high = 0xBF;
};

Lead lead_of(unsigned char byte) {
  if (byte < 0x80) return {1};
  if (byte >= 0xC2 && byte <= 0xDF) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  if (byte >= 0xF1 && byte <= 0xF3) return {4};
  return {};
}

// How many bytes from `at` form the maximal subpart of a character (all of it when whole).
std::size_t matching_bytes(std::string_view text, std::size_t at, const Lead& lead) {
  std::size_t used = 1;
  while (used < lead.size && at + used < text.size()) {
    const auto byte = static_cast<unsigned char>(text[at + used]);
    const bool ok = used == 1 ? is_continuation(byte, lead.second_low, lead.second_high) : is_continuation(byte);
    if (!ok) break;
    ++used;
  }
  return used;
}

}  // namespace

std::size_t utf8_char_size(std::string_view text, std::size_t at) {
  const Lead lead = lead_of(static_cast<unsigned char>(text[at]));
  if (lead.size == 0) return 0;
  return matching_bytes(text, at, lead) == lead.size ? lead.size : 0;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    if (static_cast<unsigned char>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    const std::size_t size = utf8_char_size(text, at);
    if (size == 0) return at;
    at += size;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  // A character is at most 4 bytes: only the last 3 can be an unfinished one.
  const std::size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (std::size_t at = from; at < bytes.size(); ++at) {
    const Lead lead = lead_of(static_cast<unsigned char>(bytes[at]));
    if (lead.size > 1 && at + lead.size > bytes.size() && matching_bytes(bytes, at, lead) == bytes.size() - at) {
      return at;
    }
  }
  return bytes.size();
}

std::string repair_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t at = 0;
  while (at < bytes.size()) {
    const Lead lead = lead_of(static_cast<unsigned char>(bytes[at]));
    if (lead.size == 0) {
      out.append(kReplacement);
      ++at;
      continue;
    }
    const std::size_t used = matching_bytes(bytes, at, lead);
    if (used == lead.size) {
      out.append(bytes.substr(at, used));
    } else {
      out.append(kReplacement);
    }
    at += used;
  }
  return out;
}

}  // namespace mixt::text
