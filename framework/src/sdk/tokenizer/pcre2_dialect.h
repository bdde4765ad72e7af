// A tokenizer.json pattern in PCRE2's dialect, where PCRE2 (UTF, UCP) matches exactly what
// Oniguruma matches: then the pre-tokenizers run it through PCRE2's JIT, several times faster
// than Oniguruma's interpreter on long runs of letters. Checked on every code point (Unicode
// 14 in both): \p{..}, \P{..}, \d, (?i:..) with its case folding, lookarounds and possessive or
// counted quantifiers read alike; \s differs at U+180E only (PCRE2 counts it as space, as
// Unicode once did), so it becomes the explicit White_Space class. Anything else (\w, \h, \v,
// \b, ^, $, back-references, nested classes, ...) is refused, and Oniguruma runs the pattern.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mixt::text {

std::optional<std::string> pcre2_dialect(std::string_view pattern);

}  // namespace mixt::text
