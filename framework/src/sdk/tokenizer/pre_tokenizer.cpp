#include "pre_tokenizer.h"

#include "byte_level.h"

namespace mixt::text {

namespace {

// GPT-2's pre-tokenization pattern, as ByteLevel(use_regex=true) applies it, with the runs
// that end their alternative possessive (++): nothing after them can make the engine give a
// character back, so the matches are the same, but Oniguruma then keeps no backtracking entry
// per character (a run of CJK text grew, and copied, its stack on every search).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s+(?!\S)|\s++)";

struct Span {
  std::size_t begin;
  std::size_t end;
  bool matched;
};

std::vector<Span> spans_of(const UnicodeRegex& regex, const std::string& text, bool invert) {
  std::vector<Span> spans;
  std::size_t previous = 0;
  regex.for_each_match(text, [&](std::size_t begin, std::size_t end) {
    if (begin > previous) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  });
  if (previous < text.size()) spans.push_back({previous, text.size(), invert});
  return spans;
}

// The pieces the spans make under `behavior`, appended to `out`.
void append_pieces(Pieces& out, const Piece& whole, const std::vector<Span>& spans, SplitBehavior behavior) {
  const std::string& text = whole.text;
  const auto piece = [&](std::size_t begin, std::size_t end) {
    out.push_back({text.substr(begin, end - begin), whole.at_start && begin == 0});
  };
  std::size_t pending = std::string::npos;  // start of a piece not yet closed (merged spans)
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    switch (behavior) {
      case SplitBehavior::removed:
        if (!s.matched) piece(s.begin, s.end);
        break;
      case SplitBehavior::isolated:
        piece(s.begin, s.end);
        break;
      case SplitBehavior::merged_with_previous:
        // A match closes the text before it; a match after a match stands alone.
        if (pending == std::string::npos) pending = s.begin;
        if (s.matched || i + 1 == spans.size() || !spans[i + 1].matched) {
          piece(pending, s.end);
          pending = std::string::npos;
        }
        break;
      case SplitBehavior::merged_with_next:
        // A match opens the text after it; a match followed by a match stands alone.
        if (s.matched && i + 1 < spans.size() && !spans[i + 1].matched) {
          pending = s.begin;
        } else {
          piece(pending == std::string::npos ? s.begin : pending, s.end);
          pending = std::string::npos;
        }
        break;
      case SplitBehavior::contiguous:
        if (pending == std::string::npos) pending = s.begin;
        if (i + 1 == spans.size() || !s.matched || !spans[i + 1].matched) {
          piece(pending, s.end);
          pending = std::string::npos;
        }
        break;
    }
  }
}

}  // namespace

SplitPreTokenizer::SplitPreTokenizer(const std::string& regex, SplitBehavior behavior, bool invert)
    : regex_(regex), behavior_(behavior), invert_(invert) {}

Pieces SplitPreTokenizer::split(Pieces pieces) const {
  Pieces out;
  out.reserve(pieces.size() * 4);
  for (const Piece& piece : pieces) {
    if (piece.text.empty()) continue;
    append_pieces(out, piece, spans_of(regex_, piece.text, invert_), behavior_);
  }
  return out;
}

bool SplitPreTokenizer::stream(std::string_view text, const PieceVisitor& visit) const {
  return stream_mapped(text, visit, /*byte_level=*/false);
}

bool SplitPreTokenizer::stream_mapped(std::string_view text, const PieceVisitor& visit, bool byte_level) const {
  if (behavior_ != SplitBehavior::isolated) return false;
  thread_local std::string mapped;
  const auto piece = [&](std::size_t begin, std::size_t end) {
    const std::string_view raw = text.substr(begin, end - begin);
    if (!byte_level) return visit(raw);
    mapped.clear();
    append_byte_level(mapped, raw);
    visit(mapped);
  };
  // Isolated: every match and every stretch between them is a piece (inverted or not).
  std::size_t previous = 0;
  regex_.for_each_match(text, [&](std::size_t begin, std::size_t end) {
    if (begin > previous) piece(previous, begin);
    piece(begin, end);
    previous = end;
  });
  if (previous < text.size()) piece(previous, text.size());
  return true;
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space),
      gpt2_split_(use_regex ? std::make_unique<SplitPreTokenizer>(kGpt2Pattern, SplitBehavior::isolated, false)
                            : nullptr) {}

Pieces ByteLevelPreTokenizer::split(Pieces pieces) const {
  if (add_prefix_space_) {
    for (Piece& piece : pieces) {
      if (!piece.text.empty() && piece.text.front() != ' ') piece.text.insert(piece.text.begin(), ' ');
    }
  }
  if (gpt2_split_) pieces = gpt2_split_->split(std::move(pieces));
  for (Piece& piece : pieces) {
    std::string mapped;
    mapped.reserve(piece.text.size() * 2);
    append_byte_level(mapped, piece.text);
    piece.text = std::move(mapped);
  }
  return pieces;
}

bool ByteLevelPreTokenizer::stream(std::string_view text, const PieceVisitor& visit) const {
  if (add_prefix_space_) return false;
  if (gpt2_split_) return gpt2_split_->stream_mapped(text, visit, /*byte_level=*/true);
  thread_local std::string mapped;
  mapped.clear();
  append_byte_level(mapped, text);
  visit(mapped);
  return true;
}

MetaspacePreTokenizer::MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
    : replacement_(std::move(replacement)),
      scheme_(scheme),
      splitter_(split ? std::make_unique<SplitPreTokenizer>(escaped_regex(replacement_),
                                                            SplitBehavior::merged_with_next, false)
                      : nullptr) {}

Pieces MetaspacePreTokenizer::split(Pieces pieces) const {
  for (Piece& piece : pieces) {
    std::string replaced;
    for (char c : piece.text) {
      if (c == ' ') {
        replaced += replacement_;
      } else {
        replaced.push_back(c);
      }
    }
    const bool prepend = scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && piece.at_start);
    if (prepend && !replaced.starts_with(replacement_)) replaced.insert(0, replacement_);
    piece.text = std::move(replaced);
  }
  return splitter_ ? splitter_->split(std::move(pieces)) : pieces;
}

Pieces SequencePreTokenizer::split(Pieces pieces) const {
  for (const auto& step : steps_) pieces = step->split(std::move(pieces));
  return pieces;
}

bool SequencePreTokenizer::stream(std::string_view text, const PieceVisitor& visit) const {
  if (steps_.size() != 2) return false;
  const auto* split = dynamic_cast<const SplitPreTokenizer*>(steps_[0].get());
  const auto* bytes = dynamic_cast<const ByteLevelPreTokenizer*>(steps_[1].get());
  if (split == nullptr || bytes == nullptr || !bytes->maps_only()) return false;
  return split->stream_mapped(text, visit, /*byte_level=*/true);
}

std::string escaped_regex(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace mixt::text
