// Counts as people read them: 11177538 -> "11,177,538" (`mixt check`, `mixt tokenize`).
#pragma once

#include <cstdint>
#include <string>

namespace mixt::cli {

inline std::string with_thousands(std::int64_t n) {
  const std::string digits = std::to_string(n);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

}  // namespace mixt::cli
