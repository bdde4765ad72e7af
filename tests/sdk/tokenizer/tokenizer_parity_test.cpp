// mixt's tokenizers against the references: tokenizers trained here by Hugging Face
// `tokenizers` (GPT-2-, Llama-3- and Qwen-2-style byte-level BPE; Llama 2 as transformers
// converts it, with normalizers or with Metaspace, and byte fallback) and by `sentencepiece`,
// then a varied text (GPL-3, several scripts, emoji, runs of spaces, code, special tokens in
// the text) encoded and decoded by both (tests/support/tokenizer_reference.py).
#include <gtest/gtest.h>
#include <mixt/tokenizer.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace mixt::testing {
namespace {

class Reference {
 public:
  static const Reference& get() {
    static const Reference instance;
    return instance;
  }
  fs::path dir() const { return dir_.path(); }
  const nlohmann::json& cases() const { return cases_; }
  bool ok() const { return ok_; }
  const std::string& output() const { return output_; }

 private:
  Reference() {
    const CommandResult made =
        run_command("python3 " + shell_quote((source_dir() / "tests/support/tokenizer_reference.py").string()) + " " +
                    shell_quote(dir_.path().string()));
    output_ = made.output;
    ok_ = made.exit_code == 0;
    if (ok_) cases_ = nlohmann::json::parse(read_file(dir_.path() / "cases.json"));
  }
  TempDir dir_;
  nlohmann::json cases_;
  bool ok_ = false;
  std::string output_;
};

struct Family {
  const char* name;
  const char* file;
};

class TokenizerParity : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Reference::get().ok()) << Reference::get().output();
    tokenizer_ = load_tokenizer(Reference::get().dir() / GetParam().name / GetParam().file);
  }
  const nlohmann::json& cases() const { return Reference::get().cases()[GetParam().name]; }
  std::unique_ptr<Tokenizer> tokenizer_;
};

std::string shown(const std::string& text) { return text.size() > 80 ? text.substr(0, 80) + "..." : text; }

TEST_P(TokenizerParity, EncodesToTheReferenceIds) {
  ASSERT_GT(cases().size(), 100u);
  std::size_t differing = 0;
  for (const auto& c : cases()) {
    const auto text = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tokenizer_->encode(text);
    if (got != expected && ++differing <= 5) ADD_FAILURE() << "encode(\"" << shown(text) << "\") differs";
  }
  EXPECT_EQ(differing, 0u);
}

TEST_P(TokenizerParity, AddsTheSpecialTokensTheReferenceAdds) {
  for (const auto& c : cases()) {
    const auto text = c["text"].get<std::string>();
    EXPECT_EQ(tokenizer_->encode(text, true), c["ids_with_special"].get<std::vector<TokenId>>()) << shown(text);
  }
}

TEST_P(TokenizerParity, DecodesToTheReferenceText) {
  for (const auto& c : cases()) {
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tokenizer_->decode(ids), c["decoded"].get<std::string>()) << shown(c["text"].get<std::string>());
    EXPECT_EQ(tokenizer_->decode(ids, true), c["decoded_skipping"].get<std::string>());
  }
}

// A stream of ids printed as they come reads, in the end, as the whole decode.
TEST_P(TokenizerParity, StreamsTheSameTextAsItDecodes) {
  for (const auto& c : cases()) {
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    if (ids.size() > 400) continue;  // each push decodes all so far
    TextStream stream(*tokenizer_);
    std::string printed;
    for (const TokenId id : ids) printed += stream.push(id);
    printed += stream.finish();
    EXPECT_EQ(printed, c["decoded"].get<std::string>()) << shown(c["text"].get<std::string>());
  }
}

// Whether `text` is well-formed UTF-8 (Unicode's table 3-7), written out here rather than
// asked of the code under test.
bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char b = byte(i);
    std::size_t n = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (b < 0x80)
      n = 1;
    else if (b >= 0xC2 && b <= 0xDF)
      n = 2;
    else if (b >= 0xE0 && b <= 0xEF)
      n = 3, low = b == 0xE0 ? 0xA0 : 0x80, high = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4)
      n = 4, low = b == 0xF0 ? 0x90 : 0x80, high = b == 0xF4 ? 0x8F : 0xBF;
    else
      return false;
    if (i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
      if (byte(i + k) < lo || byte(i + k) > hi) return false;
    }
    i += n;
  }
  return true;
}

// A sampling model may draw a byte token that starts a character and then anything else: each
// printed piece is valid UTF-8 and, together, they are the reference's decode (U+FFFD where it
// writes one).
TEST_P(TokenizerParity, StreamsValidUtf8WhereCharactersAreLeftUnfinished) {
  const auto partial = nlohmann::json::parse(read_file(Reference::get().dir() / "partial.json"))[GetParam().name];
  TextStream stream(*tokenizer_);
  std::string printed;
  for (const TokenId id : partial["ids"].get<std::vector<TokenId>>()) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << "after id " << id << ": " << piece;
    printed += piece;
  }
  const std::string rest = stream.finish();
  EXPECT_TRUE(valid_utf8(rest)) << rest;
  EXPECT_EQ(printed + rest, partial["decoded"].get<std::string>());
}

TEST_P(TokenizerParity, KnowsItsVocabularyAndEndOfText) {
  std::int64_t largest = 0;
  for (const auto& c : cases()) {
    for (const auto& id : c["ids_with_special"]) largest = std::max<std::int64_t>(largest, id.get<std::int64_t>());
  }
  EXPECT_GT(tokenizer_->vocab_size(), largest);
  ASSERT_TRUE(tokenizer_->end_of_text().has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Families, TokenizerParity,
    ::testing::Values(Family{"gpt2_style", "tokenizer.json"}, Family{"llama3_style", "tokenizer.json"},
                      Family{"qwen2_style", "tokenizer.json"}, Family{"llama2_style", "tokenizer.json"},
                      Family{"metaspace_style", "tokenizer.json"}, Family{"sentencepiece", "tokenizer.model"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mixt::testing
