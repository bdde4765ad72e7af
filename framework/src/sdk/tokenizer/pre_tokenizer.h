// tokenizer.json's pre-tokenizers: each splits the pieces of text it is given into smaller
// pieces (and ByteLevel also maps their bytes to its alphabet); BPE then runs on each piece.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include "unicode_regex.h"

namespace mixt::text {

// A stretch of text, and whether it starts where the encoded text starts (Metaspace's
// prepend_scheme "first" prepends to that one only).
struct Piece {
  std::string text;
  bool at_start = false;
  bool operator==(const Piece&) const = default;
};
using Pieces = std::vector<Piece>;

// Each piece of a stream, handed over as it is made: `visit` reads it during the call only.
using PieceVisitor = std::function<void(std::string_view piece)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Pieces split(Pieces pieces) const = 0;
  // The pieces split({{text, at_start}}) would make, without a string for each: the encoder's
  // fast path (most text meets only a regex split and the byte alphabet). False, and nothing
  // visited, for a pre-tokenizer that does not stream; the caller then uses split().
  virtual bool stream(std::string_view text, const PieceVisitor& visit) const { return false; }
};

// Where the matches of a Split go (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Split: the text around and at the matches of a regex (or of a literal string).
class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const std::string& regex, SplitBehavior behavior, bool invert);
  Pieces split(Pieces pieces) const override;
  // Its pieces, mapped by `then` (ByteLevel's alphabet) when given. Only the isolated
  // behaviour streams.
  bool stream(std::string_view text, const PieceVisitor& visit) const override;
  bool stream_mapped(std::string_view text, const PieceVisitor& visit, bool byte_level) const;

 private:
  UnicodeRegex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

// ByteLevel: optionally a leading space, optionally GPT-2's split, then the byte alphabet.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  Pieces split(Pieces pieces) const override;
  bool stream(std::string_view text, const PieceVisitor& visit) const override;
  // Whether it only maps bytes (no prefix space, no split): a Sequence's last step then streams.
  bool maps_only() const { return !add_prefix_space_ && !gpt2_split_; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> gpt2_split_;  // null unless use_regex
};

// Metaspace: spaces become `replacement` (U+2581), one is put in front (always, or only at
// the start of the text, or never), then the text splits before each (when `split`).
enum class PrependScheme { always, first, never };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split);
  Pieces split(Pieces pieces) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
  std::unique_ptr<SplitPreTokenizer> splitter_;  // null unless split
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  Pieces split(Pieces pieces) const override;
  // Streams Llama 3's and Qwen 2's form: a Split, then a ByteLevel that only maps bytes.
  bool stream(std::string_view text, const PieceVisitor& visit) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// A regex that matches `literal` and nothing else (Split's {"String": ...} pattern).
std::string escaped_regex(const std::string& literal);

}  // namespace mixt::text
