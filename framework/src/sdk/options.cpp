// The formatting and checking behind mixt/options.h, kept out of the SDK header.
#include "mixt/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace mixt {

namespace {
std::string shortest(double value) {
  char text[64];
  return std::string(text, std::to_chars(text, text + sizeof(text), value).ptr);
}

bool plain_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
         ch == '.' || ch == '/' || ch == '-';
}

// Whether YAML reads `value` written plain back as the same string.
bool reads_back_plain(const std::string& value) {
  if (value.empty() || value.front() == '-' || value.front() == '.') return false;
  for (const char ch : value) {
    if (!plain_char(ch)) return false;
  }
  std::string lower;
  for (const char ch : value) lower += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  for (const char* word : {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "inf", "nan"}) {
    if (lower == word) return false;
  }
  char* end = nullptr;
  (void)std::strtod(value.c_str(), &end);  // a number would read back as one
  return end != value.c_str() + value.size();
}
}  // namespace

std::string format_yaml(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string out = shortest(value);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string format_yaml(std::int64_t value) { return std::to_string(value); }

std::string format_yaml(bool value) { return value ? "true" : "false"; }

std::string format_yaml(const std::string& value) {
  if (reads_back_plain(value)) return value;
  std::string out = "\"";
  for (const char ch : value) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          const char* hex = "0123456789ABCDEF";
          out += std::string("\\x") + hex[(ch >> 4) & 0xF] + hex[ch & 0xF];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::optional<std::string> Bounds::failure(double value) const {
  const bool low_ok = !low_ || (low_open_ ? value > *low_ : value >= *low_);
  const bool high_ok = !high_ || (high_open_ ? value < *high_ : value <= *high_);
  if (low_ok && high_ok) return std::nullopt;
  if (low_ && high_) {
    return "must be in " + std::string(low_open_ ? "(" : "[") + shortest(*low_) + ", " + shortest(*high_) +
           (high_open_ ? ")" : "]");
  }
  if (low_) {
    if (*low_ == 0) return low_open_ ? "must be positive" : "must not be negative";
    return (low_open_ ? "must be greater than " : "must be at least ") + shortest(*low_);
  }
  return (high_open_ ? "must be less than " : "must be at most ") + shortest(*high_);
}

Check<std::string> one_of(std::vector<std::string> choices) {
  std::string words, listed;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    words += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    listed += (i ? ", " : "") + choices[i];
  }
  return Check<std::string>(
      [choices, words](const std::string& value) -> std::optional<std::string> {
        for (const auto& choice : choices) {
          if (value == choice) return std::nullopt;
        }
        return "expected " + words + ", got \"" + value + "\"";
      },
      "one of: " + listed);
}

}  // namespace mixt

namespace mixt {

WordOrList read_word_or_list(const Config& c, const std::string& key, const std::vector<std::string>& words,
                             const std::string& default_word, const std::string& names_are) {
  std::optional<std::string> word;
  try {
    word = c.string(key, default_word);
  } catch (const Error&) {  // not a scalar: a list of names (or a mistake strings() reports)
  }
  if (!word) {
    WordOrList listed{{}, c.strings(key, {})};
    for (const std::string& name : listed.names) {
      if (name.empty()) c.fail(key, "an empty name in the list of " + names_are);
    }
    return listed;
  }
  for (const std::string& known : words) {
    if (*word == known) return {*word, {}};
  }
  std::string expected;
  for (const std::string& known : words) expected += known + ", ";
  if (!words.empty()) expected.replace(expected.size() - 2, 2, " or ");
  c.fail(key, "expected " + expected + "a list of " + names_are + ", got '" + *word + "'",
         "write [" + *word + "] for a list of one");
}

}  // namespace mixt

namespace mixt {

void RecipeSection::fail_missing(std::string_view key) const {
  (void)section_.string(key);  // absent: Config's missing-option error, with its misspelling check
  section_.fail(key, "missing required option");
}

}  // namespace mixt

namespace mixt {

bool written(const Config& section, std::string_view key) {
  if (section.empty()) return false;
  for (const std::string& present : section.keys()) {
    if (present == key) return true;
  }
  return false;
}

}  // namespace mixt
