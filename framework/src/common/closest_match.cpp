#include "common/closest_match.h"

#include <algorithm>
#include <numeric>

namespace mixt {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Levenshtein distance with one row of memory.
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  // A typo changes a few characters; anything further is a different word.
  const std::size_t tolerance = std::max<std::size_t>(2, word.size() / 3);
  if (best && best_distance <= tolerance) return best;
  return std::nullopt;
}

std::string suggestion_hint(std::string_view word, const std::vector<std::string>& candidates,
                            std::string_view what) {
  std::vector<std::string> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  std::string known;
  for (const auto& name : sorted) known += (known.empty() ? "" : ", ") + name;
  if (known.empty()) known = "(none)";
  std::string hint;
  if (auto match = closest_match(word, sorted)) {
    hint = "did you mean '" + *match + "'? ";
  } else if (word.size() >= 2) {
    // A name cut short ("amp" for amp_fp16/amp_bf16) is too far for a typo: offer the names
    // it begins, when they are few enough to be a suggestion.
    std::vector<std::string> completions;
    for (const auto& name : sorted) {
      if (name.size() > word.size() && name.compare(0, word.size(), word) == 0) completions.push_back(name);
    }
    if (!completions.empty() && completions.size() <= 3) {
      hint = "did you mean ";
      for (std::size_t i = 0; i < completions.size(); ++i) {
        hint += (i == 0 ? "'" : i + 1 == completions.size() ? " or '" : ", '") + completions[i] + "'";
      }
      hint += "? ";
    }
  }
  return hint + std::string(what) + ": " + known;
}

}  // namespace mixt
