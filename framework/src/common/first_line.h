// LibTorch's error texts go on for lines (notes, a C++ backtrace); a mixt message quotes
// the first one, which says what went wrong.
#pragma once

#include <string>

namespace mixt {

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace mixt
