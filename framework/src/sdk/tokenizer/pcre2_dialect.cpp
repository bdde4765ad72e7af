#include "pcre2_dialect.h"

#include <cctype>

namespace mixt::text {

namespace {

// Unicode's White_Space, Oniguruma's \s for UTF-8: PCRE2's \s adds U+180E.
constexpr std::string_view kSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

}  // namespace

std::optional<std::string> pcre2_dialect(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return std::nullopt;
      const char e = pattern[++i];
      switch (e) {
        case 's':
          out.append(in_class ? std::string(kSpace) : "[" + std::string(kSpace) + "]");
          break;
        case 'S':
          if (in_class) return std::nullopt;
          out.append("[^").append(kSpace).append("]");
          break;
        case 'p':
        case 'P':
        case 'x': {  // \p{L}, \P{N}, \x{2581}: copied to the closing brace
          if (i + 1 >= pattern.size() || pattern[i + 1] != '{') return std::nullopt;
          const std::size_t close = pattern.find('}', i);
          if (close == std::string_view::npos) return std::nullopt;
          out.push_back('\\');
          out.append(pattern.substr(i, close - i + 1));
          i = close;
          break;
        }
        case 'd':
        case 'r':
        case 'n':
        case 't':
        case 'f':
          out.push_back('\\');
          out.push_back(e);
          break;
        default:
          // An escaped punctuation character is itself in both; a letter or digit is a class,
          // an anchor or a back-reference that may differ.
          if (std::isalnum(static_cast<unsigned char>(e)) || static_cast<unsigned char>(e) >= 0x80) return std::nullopt;
          out.push_back('\\');
          out.push_back(e);
      }
      continue;
    }
    if (in_class) {
      if (c == '[') return std::nullopt;  // a nested class or [:alpha:]
      if (c == ']') in_class = false;
      out.push_back(c);
      continue;
    }
    if (c == '^' || c == '$') return std::nullopt;  // line anchors in Oniguruma, string anchors in PCRE2
    if (c == '.') return std::nullopt;              // each engine's newline convention
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' first in the class is a literal in PCRE2 and an error or literal in Oniguruma.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') return std::nullopt;
      continue;
    }
    out.push_back(c);
  }
  if (in_class) return std::nullopt;
  return out;
}

}  // namespace mixt::text
