// The pre-tokenizers' regular expressions (\p{L}, \p{N}, lookaheads, (?i:...)), matched
// exactly as Oniguruma, the engine Hugging Face tokenizers itself uses, matches them: by
// PCRE2's JIT when the pattern has a form PCRE2 reads alike (pcre2_dialect.h; GPT-2's,
// Llama 3's and Qwen 2's do), else by Oniguruma itself.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace mixt::text {

class UnicodeRegex {
 public:
  // Which engine runs the pattern: PCRE2 where it can, or Oniguruma always (the tests'
  // reference for the other).
  enum class Engine { fastest, oniguruma };
  // Throws std::invalid_argument with Oniguruma's message when `pattern` does not compile.
  explicit UnicodeRegex(const std::string& pattern, Engine engine = Engine::fastest);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Calls visit(begin, end) for each non-empty match in `text` (valid UTF-8), left to right.
  void for_each_match(std::string_view text, const std::function<void(std::size_t, std::size_t)>& visit) const;
  // Whether PCRE2 runs it (for the tests that hold both engines to the same matches).
  bool uses_pcre2() const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace mixt::text
