// A SentencePiece model's precompiled_charsmap (its normalization rules), which
// libsentencepiece trusts: a damaged one made encode() read outside the model (a SEGV found
// by fuzzing, fuzz/regressions/sentencepiece). Tries here are built by hand in darts-clone's
// layout: a unit's low 8 bits its label, bit 8 "has a leaf", bits 10 and up its offset.
#include "sdk/tokenizer/sentencepiece_charsmap.h"

#include <gtest/gtest.h>
#include <mixt/error.h>
#include <mixt/tokenizer.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "test_support.h"

namespace mixt::testing {
namespace {

// A charsmap: the trie's size in bytes, the trie, then the strings its leaves point into.
std::string charsmap(const std::vector<std::uint32_t>& units, const std::string& strings) {
  const auto trie_bytes = static_cast<std::uint32_t>(units.size() * sizeof(std::uint32_t));
  std::string blob(sizeof(trie_bytes) + trie_bytes, '\0');
  std::memcpy(blob.data(), &trie_bytes, sizeof(trie_bytes));
  std::memcpy(blob.data() + sizeof(trie_bytes), units.data(), trie_bytes);
  return blob + strings;
}

// One block of 256 units, the root's children at 0..255: byte 'a' has a leaf whose value
// (the unit at 'a', bit 31 set) is `value`.
std::vector<std::uint32_t> one_rule(std::uint32_t value) {
  std::vector<std::uint32_t> units(256, 0);
  units['a'] = 'a' | (1u << 8) | (('a' ^ 'b') << 10);  // its leaf at 'a' ^ offset = 'b'
  units['b'] = (1u << 31) | value;
  return units;
}

// The model as the fuzz files hold it: one byte, the text's length, then the text.
std::string model_of_fuzz_file(const std::string& path) {
  const std::string input = read_file(configured::source_dir() + "/fuzz/" + path);
  return input.substr(1 + static_cast<unsigned char>(input[0]));
}

TEST(SentencePieceCharsmap, ASoundTrieIsAccepted) {
  EXPECT_EQ(text::charsmap_problem(charsmap(std::vector<std::uint32_t>(256, 0), std::string(1, '\0'))), std::nullopt);
  EXPECT_EQ(text::charsmap_problem(charsmap(one_rule(0), std::string("A\0", 2))), std::nullopt);
}

TEST(SentencePieceCharsmap, ARuleOutsideItsStringsIsAProblem) {
  EXPECT_EQ(text::charsmap_problem(charsmap(one_rule(2), std::string("A\0", 2))),
            "a normalization rule points outside its strings");
}

TEST(SentencePieceCharsmap, ATrieReachingOutsideItselfIsAProblem) {
  std::vector<std::uint32_t> units(256, 0);
  units[0] = 512u << 10;  // the root's children at 512..767, past the trie's end
  EXPECT_EQ(text::charsmap_problem(charsmap(units, std::string(1, '\0'))),
            "its normalization trie reaches outside itself");
}

TEST(SentencePieceCharsmap, StringsWithoutTheirLastNulAreAProblem) {
  EXPECT_EQ(text::charsmap_problem(charsmap(one_rule(0), "A")), "its normalization strings do not end with a NUL");
}

TEST(SentencePieceCharsmap, TheFuzzedModelIsRefusedInWordsAndTheSeedStillReads) {
  TempDir dir;
  try {
    load_tokenizer(dir.write("tokenizer.model",
                             model_of_fuzz_file("regressions/sentencepiece/charsmap_trie_value_outside_strings_segv")));
    ADD_FAILURE() << "a model whose charsmap points outside itself was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its precompiled_charsmap is damaged"), std::string::npos) << e.what();
  }
  // The seed it was mutated from (nmt_nfkc's rules): the check refuses no sound model.
  const auto tokenizer =
      load_tokenizer(dir.write("seed.model", model_of_fuzz_file("corpus/sentencepiece/bpe_byte_fallback")));
  EXPECT_FALSE(tokenizer->encode("ﬁ café", false).empty());
}

}  // namespace
}  // namespace mixt::testing
