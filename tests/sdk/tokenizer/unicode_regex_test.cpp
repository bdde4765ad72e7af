// The pre-tokenizers' patterns through PCRE2's JIT against Oniguruma, the engine Hugging Face
// tokenizers runs (the reference): the same matches on a text that holds every Unicode code
// point between letters, digits, spaces and apostrophes, for GPT-2's, Llama 3's and Qwen 2's
// patterns; and the patterns PCRE2 may read otherwise stay with Oniguruma.
#include "sdk/tokenizer/unicode_regex.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "sdk/tokenizer/pcre2_dialect.h"
#include "sdk/tokenizer/utf8.h"

namespace mixt::text {
namespace {

using Matches = std::vector<std::pair<std::size_t, std::size_t>>;

Matches matches(const UnicodeRegex& regex, std::string_view text) {
  Matches found;
  regex.for_each_match(text, [&](std::size_t begin, std::size_t end) { found.emplace_back(begin, end); });
  return found;
}

// Every code point (not the surrogates), each between neighbours that exercise the
// alternatives: a letter, a digit, a space, an apostrophe, a newline, a run of spaces.
std::string every_code_point() {
  std::string text;
  const char* around[] = {"a", "7", " ", "'", "\n", "   ", "'S", "x\r\n"};
  std::size_t k = 0;
  for (char32_t c = 1; c < 0x110000; ++c) {
    if (c >= 0xD800 && c < 0xE000) continue;
    append_utf8(text, c);
    text += around[k++ % std::size(around)];
  }
  return text;
}

const std::vector<std::string> kPatterns = {
    // GPT-2's (ByteLevel's, possessive as mixt runs it) and as tokenizer.json files write it.
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s+(?!\S)|\s++)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
    // Llama 3's and Qwen 2's Split patterns.
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    // Metaspace's split and a digits split.
    R"(\x{2581})", R"(\p{N})"};

TEST(UnicodeRegex, Pcre2MatchesWhatOnigurumaMatchesOnEveryCodePoint) {
  const std::string text = every_code_point();
  for (const std::string& pattern : kPatterns) {
    SCOPED_TRACE(pattern);
    const UnicodeRegex fast(pattern);
    const UnicodeRegex reference(pattern, UnicodeRegex::Engine::oniguruma);
    ASSERT_TRUE(fast.uses_pcre2());
    ASSERT_FALSE(reference.uses_pcre2());
    const Matches expected = matches(reference, text);
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(matches(fast, text), expected);
  }
}

// \s is Unicode's White_Space in Oniguruma; PCRE2's adds U+180E: the dialect spells it out.
TEST(UnicodeRegex, TheMongolianVowelSeparatorIsNoSpace) {
  const std::string text =
      "a\xE1\xA0\x8E"
      "b";  // a U+180E b
  for (const char* pattern : {R"(\s+)", R"([^\s\p{L}]+)", R"(\S+)"}) {
    SCOPED_TRACE(pattern);
    EXPECT_EQ(matches(UnicodeRegex(pattern), text),
              matches(UnicodeRegex(pattern, UnicodeRegex::Engine::oniguruma), text));
  }
}

// What the two engines read otherwise (measured: \w takes marks in Oniguruma, \h is a hex
// digit there, ^ and $ are line anchors, \S in a class cannot be spelled out) stays with
// Oniguruma.
TEST(UnicodeRegex, PatternsPcre2ReadsOtherwiseStayWithOniguruma) {
  for (const char* pattern :
       {R"(\w+)", R"(\h)", R"(^a)", R"(a$)", R"([\S])", R"(\v)", R"(\b)", R"(a.b)", R"([[:alpha:]])", R"((a)\1)"}) {
    SCOPED_TRACE(pattern);
    EXPECT_FALSE(pcre2_dialect(pattern).has_value());
    EXPECT_FALSE(UnicodeRegex(pattern).uses_pcre2());
  }
  EXPECT_EQ(pcre2_dialect(R"([^\r\n\p{L}]\.)"), std::optional<std::string>(R"([^\r\n\p{L}]\.)"));
}

}  // namespace
}  // namespace mixt::text
