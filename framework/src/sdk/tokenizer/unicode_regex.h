// The pre-tokenizers' regular expressions (\p{L}, \p{N}, lookaheads, (?i:...)) through
// Oniguruma, the engine Hugging Face tokenizers itself uses, so that a pattern splits text
// exactly where it does there.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace mixt::text {

class UnicodeRegex {
 public:
  // Throws std::invalid_argument with Oniguruma's message when `pattern` does not compile.
  explicit UnicodeRegex(const std::string& pattern);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Calls visit(begin, end) for each non-empty match in `text` (valid UTF-8), left to right.
  void for_each_match(std::string_view text, const std::function<void(std::size_t, std::size_t)>& visit) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace mixt::text
