#include "sentencepiece_charsmap.h"

#include <cstdint>
#include <cstring>
#include <unordered_set>
#include <vector>

namespace mixt::text {

namespace {

// darts-clone's unit (darts.h, DoubleArrayUnit), as libsentencepiece reads it.
bool has_leaf(std::uint32_t unit) { return ((unit >> 8) & 1) == 1; }
std::uint32_t value_of(std::uint32_t unit) { return unit & ((1U << 31) - 1); }
std::uint32_t label_of(std::uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
std::uint32_t offset_of(std::uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); }

// Reads protobuf's wire format: enough to find length-delimited fields.
struct Wire {
  std::string_view rest;
  std::optional<std::uint64_t> varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && !rest.empty(); shift += 7) {
      const auto byte = static_cast<std::uint8_t>(rest.front());
      rest.remove_prefix(1);
      value |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }
  // The next field's number and, when length-delimited, its bytes; false at the end or
  // where the bytes are not protobuf.
  bool next(std::uint64_t& field, std::optional<std::string_view>& bytes) {
    const std::optional<std::uint64_t> key = varint();
    if (!key) return false;
    field = *key >> 3;
    bytes.reset();
    switch (*key & 7) {
      case 0:
        return varint().has_value();
      case 1:
      case 5: {
        const std::size_t size = (*key & 7) == 1 ? 8 : 4;
        if (rest.size() < size) return false;
        rest.remove_prefix(size);
        return true;
      }
      case 2: {
        const std::optional<std::uint64_t> size = varint();
        if (!size || *size > rest.size()) return false;
        bytes = rest.substr(0, *size);
        rest.remove_prefix(*size);
        return true;
      }
      default:
        return false;  // groups: no field of a ModelProto is one
    }
  }
};

}  // namespace

std::optional<std::string> charsmap_problem(std::string_view charsmap) {
  std::uint32_t trie_bytes = 0;
  if (charsmap.size() <= sizeof(trie_bytes)) return std::nullopt;  // libsentencepiece refuses it itself
  std::memcpy(&trie_bytes, charsmap.data(), sizeof(trie_bytes));
  if (trie_bytes >= charsmap.size()) return std::nullopt;  // likewise
  charsmap.remove_prefix(sizeof(trie_bytes));
  std::vector<std::uint32_t> units(trie_bytes / sizeof(std::uint32_t));
  if (!units.empty()) std::memcpy(units.data(), charsmap.data(), units.size() * sizeof(std::uint32_t));
  const std::string_view strings = charsmap.substr(trie_bytes);
  if (strings.empty() || strings.back() != '\0') return "its normalization strings do not end with a NUL";
  if (units.empty()) return "its normalization trie is empty";
  // Every node a search can reach (darts-clone's commonPrefixSearch), from the root: each
  // byte's child must lie in the trie, and each leaf's string among the strings.
  std::vector<std::uint32_t> bases{offset_of(units[0])};
  std::unordered_set<std::uint32_t> seen{bases.front()};
  while (!bases.empty()) {
    const std::uint32_t base = bases.back();
    bases.pop_back();
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
      const std::uint32_t at = base ^ byte;
      if (at >= units.size()) return "its normalization trie reaches outside itself";
      if (label_of(units[at]) != byte) continue;
      const std::uint32_t child = at ^ offset_of(units[at]);
      if (has_leaf(units[at])) {
        if (child >= units.size()) return "its normalization trie reaches outside itself";
        if (value_of(units[child]) >= strings.size()) return "a normalization rule points outside its strings";
      }
      if (seen.insert(child).second) bases.push_back(child);
    }
  }
  return std::nullopt;
}

std::optional<std::string> model_charsmap_problem(std::string_view model) {
  constexpr std::uint64_t kNormalizerSpec = 3, kDenormalizerSpec = 5, kPrecompiledCharsmap = 2;
  Wire proto{model};
  std::uint64_t field = 0;
  std::optional<std::string_view> spec;
  while (proto.next(field, spec)) {
    if (!spec || (field != kNormalizerSpec && field != kDenormalizerSpec)) continue;
    Wire inner{*spec};
    std::optional<std::string_view> charsmap;
    while (inner.next(field, charsmap)) {
      if (field != kPrecompiledCharsmap || !charsmap) continue;
      if (auto problem = charsmap_problem(*charsmap)) return "its precompiled_charsmap is damaged: " + *problem;
    }
  }
  return std::nullopt;
}

}  // namespace mixt::text
