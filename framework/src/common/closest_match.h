// Suggestions for misspelt names: "unknown optimizer 'sdg' (did you mean 'sgd'?)".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixt {

std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, when it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);

// "did you mean 'sgd'? known: adamw, sgd" — or "known: ..." when nothing is close.
std::string suggestion_hint(std::string_view word, const std::vector<std::string>& candidates,
                            std::string_view what = "known");

}  // namespace mixt
