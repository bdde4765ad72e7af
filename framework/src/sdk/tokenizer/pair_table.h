// BPE's merge ranks by pair of token ids, in one flat array probed linearly: the lookup the
// merge loop makes for every candidate pair, a few times faster than a node-based map's.
#pragma once

#include <cstdint>
#include <vector>

#include "mixt/tokenizer.h"

namespace mixt::text {

class PairTable {
 public:
  struct Value {
    std::uint32_t rank;
    TokenId merged;
  };

  // Inserts, or overwrites the value of a key already there (a later duplicate merge wins,
  // as in tokenizers' map).
  void assign(std::uint64_t key, Value value) {
    if ((size_ + 1) * 2 > keys_.size()) grow();
    std::size_t at = slot_of(key);
    while (keys_[at] != kEmpty && keys_[at] != key) at = (at + 1) & (keys_.size() - 1);
    if (keys_[at] == kEmpty) ++size_;
    keys_[at] = key;
    values_[at] = value;
  }

  const Value* find(std::uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (std::size_t at = slot_of(key);; at = (at + 1) & (keys_.size() - 1)) {
      if (keys_[at] == key) return &values_[at];
      if (keys_[at] == kEmpty) return nullptr;
    }
  }

 private:
  // No pair of non-negative ids makes it.
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  std::size_t slot_of(std::uint64_t key) const {
    key ^= key >> 33;  // splitmix64's finaliser: both ids reach the low bits
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<std::size_t>(key) & (keys_.size() - 1);
  }

  void grow() {
    std::vector<std::uint64_t> keys = std::move(keys_);
    std::vector<Value> values = std::move(values_);
    keys_.assign(keys.empty() ? 1024 : keys.size() * 2, kEmpty);
    values_.assign(keys_.size(), Value{});
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] != kEmpty) assign(keys[i], values[i]);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<Value> values_;
  std::size_t size_ = 0;
};

}  // namespace mixt::text
