// Tokenizer files read by hand-made examples whose ids are worked out below, and the files
// that cannot be read: each a clear error naming the file and the key.
#include <gtest/gtest.h>
#include <mixt/error.h>
#include <mixt/tokenizer.h>

#include <fstream>

#include "sdk/tokenizer/normalizer.h"
#include "sdk/tokenizer/pre_tokenizer.h"
#include "sdk/tokenizer/utf8.h"
#include "test_support.h"

namespace mixt::testing {
namespace {

// a b c, merges "b c" (rank 0) then "a bc" (rank 1); pieces split at spaces, spaces removed.
const std::string kTiny = R"({
  "added_tokens": [{"id": 7, "content": "<eot>", "special": true}],
  "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": false},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5},
            "merges": ["b c", ["a", "bc"]]}
})";

std::string error_of(const TempDir& dir, const std::string& content) {
  const fs::path file = dir.write("tokenizer.json", content);
  try {
    load_tokenizer(file);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerFile, MergesLowestRankFirstAndNeverSplitsAddedTokens) {
  TempDir dir;
  const auto tokenizer = load_tokenizer(dir.write("tokenizer.json", kTiny));
  // "abc": b+c (rank 0) first, then a+bc; "ab" has no merge although it is a token.
  EXPECT_EQ(tokenizer->encode("abc"), (std::vector<TokenId>{5}));
  EXPECT_EQ(tokenizer->encode("abab"), (std::vector<TokenId>{0, 1, 0, 1}));
  EXPECT_EQ(tokenizer->encode("ab c<eot>cb"), (std::vector<TokenId>{0, 1, 2, 7, 2, 1}));
  // No decoder: tokens joined by spaces, as tokenizers does.
  EXPECT_EQ(tokenizer->decode(std::vector<TokenId>{0, 1, 2, 7, 5}), "a b c <eot> abc");
  EXPECT_EQ(tokenizer->decode(std::vector<TokenId>{0, 7, 5}, true), "a abc");
  EXPECT_EQ(tokenizer->vocab_size(), 8);
  EXPECT_EQ(tokenizer->token_id("<eot>"), 7);
  EXPECT_EQ(tokenizer->token_id("bc"), 4);
  EXPECT_FALSE(tokenizer->token_id("cb").has_value());
}

// tokenizers' own examples for SplitDelimiterBehavior on "The-final--countdown".
TEST(TokenizerFile, SplitBehavesAsTokenizersDocumentsIt) {
  using text::SplitBehavior;
  const auto texts = [](const text::Pieces& pieces) {
    std::vector<std::string> out;
    for (const text::Piece& piece : pieces) out.push_back(piece.text);
    return out;
  };
  const auto split = [&](SplitBehavior behavior) {
    return texts(text::SplitPreTokenizer("-", behavior, false).split({{"The-final--countdown", true}}));
  };
  using P = std::vector<std::string>;
  EXPECT_EQ(split(SplitBehavior::removed), (P{"The", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::isolated), (P{"The", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_previous), (P{"The-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_next), (P{"The", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::contiguous), (P{"The", "-", "final", "--", "countdown"}));
  EXPECT_EQ(texts(text::SplitPreTokenizer("-", SplitBehavior::removed, true).split({{"a-b", true}})), (P{"-"}));
  // Only the first piece of a text that starts the encoded text starts it.
  const text::Pieces pieces = text::SplitPreTokenizer("-", SplitBehavior::isolated, false).split({{"a-b", true}});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_TRUE(pieces[0].at_start);
  EXPECT_FALSE(pieces[1].at_start);
}

// The normalizers and Metaspace on examples worked out from the Unicode tables: U+FB01 (fi
// ligature) and U+2460 (circled 1) are compatibility characters, U+00E9 decomposes into
// e + U+0301; Metaspace's U+2581 for spaces, prepended always, at the start, or never.
TEST(TokenizerFile, NormalizersAndMetaspaceDoWhatTheirNamesSay) {
  using text::UnicodeForm;
  EXPECT_EQ(text::UnicodeFormNormalizer(UnicodeForm::nfkc).normalize("\xEF\xAC\x81\xE2\x91\xA0"), "fi1");
  EXPECT_EQ(text::UnicodeFormNormalizer(UnicodeForm::nfd).normalize("\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(text::UnicodeFormNormalizer(UnicodeForm::nfc).normalize("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(text::UnicodeFormNormalizer(UnicodeForm::nfkd).normalize("\xEF\xAC\x81"), "fi");
  EXPECT_EQ(text::LowercaseNormalizer().normalize("\xC3\x80"
                                                  "B\xC3\x87"),
            "\xC3\xA0"
            "b\xC3\xA7");
  const std::string m = "\xE2\x96\x81";
  const auto texts = [](const text::Pieces& pieces) {
    std::vector<std::string> out;
    for (const text::Piece& piece : pieces) out.push_back(piece.text);
    return out;
  };
  using P = std::vector<std::string>;
  using text::PrependScheme;
  EXPECT_EQ(texts(text::MetaspacePreTokenizer(m, PrependScheme::always, true).split({{"a b", false}})),
            (P{m + "a", m + "b"}));
  EXPECT_EQ(texts(text::MetaspacePreTokenizer(m, PrependScheme::first, true).split({{"a b", false}})),
            (P{"a", m + "b"}));
  EXPECT_EQ(texts(text::MetaspacePreTokenizer(m, PrependScheme::first, false).split({{"a b", true}})),
            (P{m + "a" + m + "b"}));
  EXPECT_EQ(texts(text::MetaspacePreTokenizer(m, PrependScheme::never, true).split({{"a b", true}})),
            (P{"a", m + "b"}));
}

// Unicode's "maximal subpart" substitution (Unicode 15, section 3.9), which Rust's
// from_utf8_lossy follows: one U+FFFD per maximal invalid subpart.
TEST(TokenizerFile, RepairsBrokenUtf8AsRustDoes) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(text::repair_utf8("Hello \xF0\x90\x80World"), "Hello " + r + "World");
  EXPECT_EQ(text::repair_utf8("\xF0\x80\x80"), r + r + r);
  EXPECT_EQ(text::repair_utf8("\xE0\x80"), r + r);
  EXPECT_EQ(text::repair_utf8("a\xC3\xA9z"), "a\xC3\xA9z");
  EXPECT_EQ(text::complete_utf8_prefix("ab\xF0\x9F\x91"), 2u);
  EXPECT_EQ(text::complete_utf8_prefix("ab\xF0\x9F\x91\x8D"), 6u);
}

TEST(TokenizerFile, TruncatedJsonGivesTheLineAndColumn) {
  TempDir dir;
  const std::string message = error_of(dir, "{\"model\": {\"type\": \"BPE\",\n  \"vocab\": {\"a\": 0");
  EXPECT_NE(message.find("tokenizer.json:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

// Found by the jsonl fuzz target, in another reader (fuzz/regressions/tokenizer_json): a
// number beyond a double's range is nlohmann's out_of_range, not a parse_error, and escaped.
TEST(TokenizerFile, ANumberBeyondADoublesRangeIsNotValidJson) {
  TempDir dir;
  const std::string message = error_of(dir, R"({"model": {"type": "BPE", "dropout": 1e400}})");
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("1e400"), std::string::npos) << message;
}

TEST(TokenizerFile, OtherModelTypesAreRefusedByName) {
  TempDir dir;
  const std::string message = error_of(dir, replace_once(kTiny, "\"type\": \"BPE\"", "\"type\": \"WordPiece\""));
  EXPECT_NE(message.find("model.type: model type 'WordPiece' is not supported"), std::string::npos) << message;
}

TEST(TokenizerFile, AMergeNamingAMissingTokenIsNamed) {
  TempDir dir;
  const std::string message = error_of(dir, replace_once(kTiny, "\"b c\"", "\"b z\""));
  EXPECT_NE(message.find("merge 0 ('b' 'z'): its right part 'z' is not in the vocabulary"), std::string::npos)
      << message;
}

TEST(TokenizerFile, AnUnsupportedPreTokenizerListsWhatIs) {
  TempDir dir;
  const std::string message = error_of(
      dir,
      replace_once(kTiny, R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": false})",
                   R"({"type": "Whitespace"})"));
  EXPECT_NE(message.find("pre_tokenizer.type: pre-tokenizer 'Whitespace' is not supported (supported: ByteLevel"),
            std::string::npos)
      << message;
}

TEST(TokenizerFile, AHugeTokenIsRefusedAndAHugeFileIsNotRead) {
  TempDir dir;
  std::string long_token = "\"";
  long_token.append(100000, 'x').append("\": 5");
  const std::string message = error_of(dir, replace_once(kTiny, "\"abc\": 5", long_token));
  EXPECT_NE(message.find("tokens are at most 65536 bytes"), std::string::npos) << message;
  // A sparse 1 GiB file: refused by its size, before any of it is read.
  const fs::path huge = dir.path() / "huge.json";
  std::ofstream(huge) << "{";
  fs::resize_file(huge, 1ull << 30);
  try {
    load_tokenizer(huge);
    ADD_FAILURE() << "a 1 GiB file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1024 MiB, more than any tokenizer"), std::string::npos) << e.what();
  }
}

TEST(TokenizerFile, NeitherJsonNorSentencePieceIsSaid) {
  TempDir dir;
  const fs::path file = dir.write("tokenizer.model", std::string("\x01\x02garbage\xff", 11));
  try {
    load_tokenizer(file);
    ADD_FAILURE() << "garbage was read as a tokenizer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a tokenizer.json and not a SentencePiece model"), std::string::npos)
        << e.what();
  }
  try {
    load_tokenizer(dir.path() / "missing.json");
    ADD_FAILURE() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json: tokenizer file does not exist"), std::string::npos) << e.what();
  }
}

TEST(TokenizerFile, TextThatIsNotUtf8IsAnError) {
  TempDir dir;
  const auto tokenizer = load_tokenizer(dir.write("tokenizer.json", kTiny));
  try {
    tokenizer->encode("ab\xff");
    ADD_FAILURE() << "invalid UTF-8 was encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixt::testing
