#include "normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>

#include "utf8.h"

namespace mixt::text {

namespace {

utf8proc_option_t options_of(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::nfc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case UnicodeForm::nfd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case UnicodeForm::nfkc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeForm::nfkd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

}  // namespace

std::string UnicodeFormNormalizer::normalize(std::string text) const {
  if (text.empty()) return text;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t size = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                             static_cast<utf8proc_ssize_t>(text.size()), &mapped, options_of(form_));
  if (size < 0) throw std::invalid_argument(std::string("Unicode normalization failed: ") + utf8proc_errmsg(size));
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(size));
  std::free(mapped);
  return out;
}

std::string LowercaseNormalizer::normalize(std::string text) const {
  std::string out;
  out.reserve(text.size());
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t at = 0;
  const auto size = static_cast<utf8proc_ssize_t>(text.size());
  while (at < size) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t used = utf8proc_iterate(bytes + at, size - at, &c);
    if (used <= 0) throw std::invalid_argument("text is not UTF-8");
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(c)));
    at += used;
  }
  return out;
}

std::string PrependNormalizer::normalize(std::string text) const { return text.empty() ? text : prefix_ + text; }

std::string replace_all(const UnicodeRegex& regex, const std::string& text, const std::string& content) {
  std::string out;
  std::size_t previous = 0;
  regex.for_each_match(text, [&](std::size_t begin, std::size_t end) {
    out.append(text, previous, begin - previous).append(content);
    previous = end;
  });
  return out.append(text, previous, std::string::npos);
}

std::string ReplaceNormalizer::normalize(std::string text) const { return replace_all(regex_, text, content_); }

std::string SequenceNormalizer::normalize(std::string text) const {
  for (const auto& step : steps_) text = step->normalize(std::move(text));
  return text;
}

}  // namespace mixt::text
