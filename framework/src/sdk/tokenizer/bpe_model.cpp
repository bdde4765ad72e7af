#include "bpe_model.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <span>
#include <stdexcept>

#include "utf8.h"

namespace mixt::text {

namespace {

std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> serial{0};
  return ++serial;
}

// Pieces already tokenized, on this thread, for one model at a time (text repeats its words:
// most pieces are found here). Direct-mapped: a piece has one slot, by its hash, and a new
// piece takes the slot over. Bounded, one probe a lookup, and no allocation once the slots
// have grown to their pieces (a node map cleared when full spent a fifth of the encoding
// time on lookups and frees on text in many scripts).
class PieceCache {
 public:
  static constexpr std::size_t kSlots = std::size_t{1} << 17;

  // The ids of `piece`, or null.
  const std::vector<TokenId>* find(std::string_view piece, std::size_t hash) const {
    const Slot& slot = slots_[hash & (kSlots - 1)];
    return slot.hash == hash && slot.used && slot.piece == piece ? &slot.ids : nullptr;
  }
  void put(std::string_view piece, std::size_t hash, std::span<const TokenId> ids) {
    Slot& slot = slots_[hash & (kSlots - 1)];
    slot.hash = hash;
    slot.used = true;
    slot.piece.assign(piece);
    slot.ids.assign(ids.begin(), ids.end());
  }
  // Emptied for another model's pieces.
  void own(std::uint64_t serial) {
    if (owner_ == serial) return;
    for (Slot& slot : slots_) slot.used = false;
    owner_ = serial;
  }

 private:
  struct Slot {
    std::size_t hash = 0;
    bool used = false;
    std::string piece;
    std::vector<TokenId> ids;
  };
  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
  std::uint64_t owner_ = 0;
};

PieceCache& cache_for(std::uint64_t serial) {
  thread_local PieceCache cache;
  cache.own(serial);
  return cache;
}

struct Symbol {
  TokenId id;
  std::ptrdiff_t prev;
  std::ptrdiff_t next;
  std::size_t size;  // bytes of the piece it covers; 0 once merged into its left neighbour
};

struct Candidate {
  std::uint32_t rank;
  std::size_t position;
  TokenId merged;
  // The queue's top is the lowest rank, then the leftmost position.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : position > other.position;
  }
};

}  // namespace

BpeModel::BpeModel(Vocabulary vocabulary, const std::vector<Merge>& merges, BpeOptions options)
    : vocabulary_(std::move(vocabulary)), options_(std::move(options)), serial_(next_serial()) {
  for (const auto& [token, id] : vocabulary_) {
    if (id < 0) throw std::invalid_argument("token '" + token + "' has a negative id");
    if (static_cast<std::size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<std::size_t>(id) + 1, nullptr);
    tokens_[static_cast<std::size_t>(id)] = &token;
  }
  const auto id_of = [&](const std::string& token, std::size_t index, const char* role) {
    const auto found = vocabulary_.find(token);
    if (found == vocabulary_.end()) {
      throw std::invalid_argument("merge " + std::to_string(index) + " ('" + merges[index].left + "' '" +
                                  merges[index].right + "'): its " + role + " '" + token +
                                  "' is not in the vocabulary");
    }
    return found->second;
  };
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const TokenId left = id_of(merges[i].left, i, "left part");
    const TokenId right = id_of(merges[i].right, i, "right part");
    // With a subword prefix ("##"), "a" + "##b" merges to "ab".
    const std::string& prefix = options_.continuing_subword_prefix;
    const std::size_t strip = merges[i].right.starts_with(prefix) ? prefix.size() : 0;
    const std::string joined = merges[i].left + merges[i].right.substr(strip);
    const TokenId merged = id_of(joined, i, "result");
    merges_.assign(pair_key(left, right), {static_cast<std::uint32_t>(i), merged});
  }
  if (options_.unk_token) {
    const auto found = vocabulary_.find(*options_.unk_token);
    if (found == vocabulary_.end()) {
      throw std::invalid_argument("unk_token '" + *options_.unk_token + "' is not in the vocabulary");
    }
    unk_id_ = found->second;
  }
  if (options_.byte_fallback) {
    byte_ids_.resize(256);
    for (int byte = 0; byte < 256; ++byte) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", byte);
      const auto found = vocabulary_.find(std::string_view(name));
      if (found != vocabulary_.end()) byte_ids_[static_cast<std::size_t>(byte)] = found->second;
    }
  }
}

const std::string* BpeModel::token_of(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) return nullptr;
  return tokens_[static_cast<std::size_t>(id)];
}

// The piece's characters as symbols: each its token (with the subword prefix and word
// suffix where they apply), or its byte tokens, or the unknown token, or nothing.
void BpeModel::append_symbols(std::string_view piece, std::vector<TokenId>& symbols,
                              std::vector<std::size_t>& sizes) const {
  std::string affixed;
  bool previous_unknown = false;
  for (std::size_t at = 0; at < piece.size();) {
    std::size_t size = utf8_char_size(piece, at);
    if (size == 0) size = 1;
    std::string_view character = piece.substr(at, size);
    const bool first = at == 0;
    const bool last = at + size == piece.size();
    if ((!first && !options_.continuing_subword_prefix.empty()) || (last && !options_.end_of_word_suffix.empty())) {
      affixed.clear();
      if (!first) affixed.append(options_.continuing_subword_prefix);
      affixed.append(character);
      if (last) affixed.append(options_.end_of_word_suffix);
      character = affixed;
    }
    const auto found = vocabulary_.find(character);
    if (found != vocabulary_.end()) {
      symbols.push_back(found->second);
      sizes.push_back(size);
      previous_unknown = false;
    } else {
      bool as_bytes = options_.byte_fallback;
      for (std::size_t b = 0; as_bytes && b < size; ++b) {
        as_bytes = byte_ids_[static_cast<unsigned char>(piece[at + b])].has_value();
      }
      if (as_bytes) {
        for (std::size_t b = 0; b < size; ++b) {
          symbols.push_back(*byte_ids_[static_cast<unsigned char>(piece[at + b])]);
          sizes.push_back(1);
        }
        previous_unknown = false;
      } else if (unk_id_) {
        if (options_.fuse_unk && previous_unknown) {
          sizes.back() += size;
        } else {
          symbols.push_back(*unk_id_);
          sizes.push_back(size);
        }
        previous_unknown = true;
      }
    }
    at += size;
  }
}

// The same merges for a few symbols (most pieces are a word or less): scan for the lowest
// rank, leftmost on a tie, merge, rescan (tiktoken's loop). Quadratic, but on a handful of
// symbols it beats the queue, which allocates and rechecks stale pairs.
void BpeModel::merge_short(std::vector<TokenId>& ids, std::vector<TokenId>& out) const {
  constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::uint32_t ranks[kShortPiece];
  TokenId merged[kShortPiece];
  const auto rank_at = [&](std::size_t i) {
    const PairTable::Value* found = merges_.find(pair_key(ids[i], ids[i + 1]));
    ranks[i] = found ? found->rank : kNone;
    merged[i] = found ? found->merged : 0;
  };
  std::size_t count = ids.size();
  for (std::size_t i = 0; i + 1 < count; ++i) rank_at(i);
  while (count > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNone) break;
    ids[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < count; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --count;
    if (best + 1 < count) rank_at(best);
    if (best > 0) rank_at(best - 1);
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count));
}

void BpeModel::merge_word(std::string_view piece, std::vector<TokenId>& out) const {
  // This thread's scratch, kept between calls: a miss allocates nothing once it has grown.
  thread_local std::vector<TokenId> ids;
  thread_local std::vector<std::size_t> sizes;
  thread_local std::vector<Symbol> symbols;
  ids.clear();
  sizes.clear();
  append_symbols(piece, ids, sizes);
  if (ids.size() <= kShortPiece) return merge_short(ids, out);
  symbols.resize(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    symbols[i] = {ids[i], static_cast<std::ptrdiff_t>(i) - 1,
                  i + 1 < ids.size() ? static_cast<std::ptrdiff_t>(i + 1) : -1, sizes[i]};
  }
  const auto candidate = [&](std::size_t left) -> std::optional<Candidate> {
    const std::ptrdiff_t right = symbols[left].next;
    if (right < 0) return std::nullopt;
    const PairTable::Value* found = merges_.find(pair_key(symbols[left].id, symbols[static_cast<std::size_t>(right)].id));
    if (found == nullptr) return std::nullopt;
    return Candidate{found->rank, left, found->merged};
  };
  // A heap (std::priority_queue's order) in this thread's scratch.
  thread_local std::vector<Candidate> queue;
  queue.clear();
  const auto push = [&](const Candidate& c) {
    queue.push_back(c);
    std::push_heap(queue.begin(), queue.end());
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (auto c = candidate(i)) push(*c);
  }
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Candidate top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[top.position];
    if (left.size == 0 || left.next < 0) continue;
    // Stale when either side changed since it was queued: the pair must still merge to it.
    const std::optional<Candidate> now = candidate(top.position);
    if (!now || now->merged != top.merged) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    left.id = top.merged;
    left.size += right.size;
    left.next = right.next;
    right.size = 0;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = static_cast<std::ptrdiff_t>(top.position);
    if (left.prev >= 0) {
      if (auto c = candidate(static_cast<std::size_t>(left.prev))) push(*c);
    }
    if (auto c = candidate(top.position)) push(*c);
  }
  for (const Symbol& s : symbols) {
    if (s.size != 0) out.push_back(s.id);
  }
}

void BpeModel::tokenize(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    const auto found = vocabulary_.find(piece);
    if (found != vocabulary_.end()) {
      out.push_back(found->second);
      return;
    }
  }
  PieceCache& cache = cache_for(serial_);
  const std::size_t hash = std::hash<std::string_view>{}(piece);
  if (const std::vector<TokenId>* hit = cache.find(piece, hash)) {
    out.insert(out.end(), hit->begin(), hit->end());
    return;
  }
  const std::size_t from = out.size();
  merge_word(piece, out);
  cache.put(piece, hash, std::span<const TokenId>(out).subspan(from));
}

}  // namespace mixt::text
