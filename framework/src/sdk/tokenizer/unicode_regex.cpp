#include "unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <oniguruma.h>
#include <pcre2.h>

#include <mutex>
#include <stdexcept>

#include "pcre2_dialect.h"
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

// This thread's PCRE2 match data and JIT stack, kept for every search it makes: the JIT's
// backtracking stack is allocated once, where Oniguruma copies its own on each long match.
struct Pcre2Scratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  Pcre2Scratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~Pcre2Scratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  Pcre2Scratch(const Pcre2Scratch&) = delete;
  Pcre2Scratch& operator=(const Pcre2Scratch&) = delete;
};

// The next match at or after `from`: its [begin, end) in *begin, *end; false when none.
using NextMatch = std::function<bool(std::size_t from, std::size_t* begin, std::size_t* end)>;

void walk_matches(std::string_view text, const NextMatch& next,
                  const std::function<void(std::size_t, std::size_t)>& visit) {
  std::size_t from = 0;
  while (from < text.size()) {
    std::size_t begin = 0, end = 0;
    if (!next(from, &begin, &end)) break;
    if (end > begin) {
      visit(begin, end);
      from = end;
    } else {
      // An empty match: step over one character, as Rust's find_iter does.
      const std::size_t size = utf8_char_size(text, begin);
      from = begin + (size == 0 ? 1 : size);
    }
  }
}

}  // namespace

struct UnicodeRegex::Compiled {
  regex_t* onig = nullptr;      // when the pattern has no PCRE2 form
  pcre2_code* pcre2 = nullptr;  // else this, JIT-compiled
  ~Compiled() {
    if (onig != nullptr) onig_free(onig);
    if (pcre2 != nullptr) pcre2_code_free(pcre2);
  }
};

UnicodeRegex::UnicodeRegex(const std::string& pattern, Engine engine) : compiled_(std::make_unique<Compiled>()) {
  const std::optional<std::string> dialect = engine == Engine::fastest ? pcre2_dialect(pattern) : std::nullopt;
  if (dialect) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(dialect->data()), dialect->size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code != nullptr && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0) {
      compiled_->pcre2 = code;
      return;
    }
    if (code != nullptr) pcre2_code_free(code);  // no JIT here: Oniguruma, as tokenizers
  }
  initialize_oniguruma();
  OnigErrorInfo info;
  const int status = onig_new(&compiled_->onig, bytes_of(pattern), bytes_of(pattern) + pattern.size(), ONIG_OPTION_NONE,
                              ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (status != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, status, &info);
    compiled_->onig = nullptr;
    throw std::invalid_argument(reinterpret_cast<const char*>(message));
  }
}

UnicodeRegex::~UnicodeRegex() = default;

bool UnicodeRegex::uses_pcre2() const { return compiled_->pcre2 != nullptr; }

void UnicodeRegex::for_each_match(std::string_view text,
                                  const std::function<void(std::size_t, std::size_t)>& visit) const {
  if (compiled_->pcre2 != nullptr) {
    // The JIT does not check UTF-8 itself: text that is not (a caller's mistake) matches nothing.
    if (first_invalid_utf8(text)) return;
    thread_local Pcre2Scratch scratch;
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    walk_matches(
        text,
        [&](std::size_t from, std::size_t* begin, std::size_t* end) {
          const int found =
              pcre2_jit_match(compiled_->pcre2, subject, text.size(), from, 0, scratch.data, scratch.context);
          if (found < 0) return false;  // no match, or the stack's limit (a pathological pattern)
          const PCRE2_SIZE* span = pcre2_get_ovector_pointer(scratch.data);
          *begin = span[0];
          *end = span[1];
          return true;
        },
        visit);
    return;
  }
  const OnigUChar* begin = bytes_of(text);
  const OnigUChar* end = begin + text.size();
  Region match;
  walk_matches(
      text,
      [&](std::size_t from, std::size_t* match_begin, std::size_t* match_end) {
        const int found = onig_search(compiled_->onig, begin, end, begin + from, end, match.region, ONIG_OPTION_NONE);
        if (found < 0) return false;  // ONIG_MISMATCH, or an error the search cannot recover from
        *match_begin = static_cast<std::size_t>(match.region->beg[0]);
        *match_end = static_cast<std::size_t>(match.region->end[0]);
        return true;
      },
      visit);
}

}  // namespace mixt::text
