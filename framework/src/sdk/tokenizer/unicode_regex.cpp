#include "unicode_regex.h"

#include <oniguruma.h>

#include <mutex>
#include <stdexcept>

#include "utf8.h"

namespace mixt::text {

namespace {

void initialize_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

const OnigUChar* bytes_of(std::string_view text) { return reinterpret_cast<const OnigUChar*>(text.data()); }

// An Oniguruma match region, freed on every path.
struct Region {
  OnigRegion* region = onig_region_new();
  ~Region() { onig_region_free(region, 1); }
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

}  // namespace

struct UnicodeRegex::Compiled {
  regex_t* regex = nullptr;
  ~Compiled() {
    if (regex != nullptr) onig_free(regex);
  }
};

UnicodeRegex::UnicodeRegex(const std::string& pattern) : compiled_(std::make_unique<Compiled>()) {
  initialize_oniguruma();
  OnigErrorInfo info;
  const int status = onig_new(&compiled_->regex, bytes_of(pattern), bytes_of(pattern) + pattern.size(),
                              ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (status != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, status, &info);
    compiled_->regex = nullptr;
    throw std::invalid_argument(reinterpret_cast<const char*>(message));
  }
}

UnicodeRegex::~UnicodeRegex() = default;

void UnicodeRegex::for_each_match(std::string_view text,
                                  const std::function<void(std::size_t, std::size_t)>& visit) const {
  const OnigUChar* begin = bytes_of(text);
  const OnigUChar* end = begin + text.size();
  Region match;
  std::size_t from = 0;
  while (from < text.size()) {
    // Most patterns match where the last match ended (GPT-2's covers every character): an
    // anchored match there is the leftmost one and spares the search's setup.
    int found = onig_match(compiled_->regex, begin, end, begin + from, match.region, ONIG_OPTION_NONE);
    if (found < 0) {
      found = onig_search(compiled_->regex, begin, end, begin + from, end, match.region, ONIG_OPTION_NONE);
    }
    if (found < 0) break;  // ONIG_MISMATCH, or an error the search cannot recover from
    const auto match_begin = static_cast<std::size_t>(match.region->beg[0]);
    const auto match_end = static_cast<std::size_t>(match.region->end[0]);
    if (match_end > match_begin) {
      visit(match_begin, match_end);
      from = match_end;
    } else {
      // An empty match: step over one character, as Rust's find_iter does.
      const std::size_t size = utf8_char_size(text, match_begin);
      from = match_begin + (size == 0 ? 1 : size);
    }
  }
}

}  // namespace mixt::text
