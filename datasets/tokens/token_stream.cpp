#include "token_stream.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tokens {

// The files hold little-endian ids (numpy's default on every machine they are made on).
static_assert(std::endian::native == std::endian::little, "token files are read as little-endian uint16/uint32");

TokenStream::TokenStream(std::vector<TokenRun> runs) : runs_(std::move(runs)) {
  for (const TokenRun& run : runs_) {
    firsts_.push_back(total_);
    total_ += run.count;
  }
}

std::size_t TokenStream::run_of(std::int64_t position) const {
  // The last run starting at or before `position`: for a position inside the stream that
  // is never an empty run, whose first position is its successor's.
  auto after = std::upper_bound(firsts_.begin(), firsts_.end(), position);
  return static_cast<std::size_t>(after - firsts_.begin()) - 1;
}

void TokenStream::copy(std::int64_t start, std::int64_t count, std::int64_t* out) const {
  std::size_t run = run_of(start);
  std::int64_t local = start - firsts_[run];
  while (count > 0) {
    const TokenRun& r = runs_[run];
    const std::int64_t take = std::min(count, r.count - local);
    if (r.width == 1) {
      const std::uint8_t* from = r.bytes + local;
      for (std::int64_t i = 0; i < take; ++i) out[i] = from[i];
    } else if (r.width == 4) {
      const std::uint8_t* from = r.bytes + 4 * local;
      for (std::int64_t i = 0; i < take; ++i) {
        std::uint32_t id = 0;
        std::memcpy(&id, from + 4 * i, 4);
        out[i] = id;
      }
    } else {
      const std::uint8_t* from = r.bytes + 2 * local;
      for (std::int64_t i = 0; i < take; ++i) {
        std::uint16_t id = 0;
        std::memcpy(&id, from + 2 * i, 2);
        out[i] = id;
      }
    }
    out += take;
    count -= take;
    local = 0;
    ++run;
  }
}

std::string TokenStream::locate(std::int64_t position) const {
  const std::size_t run = run_of(position);
  const TokenRun& r = runs_[run];
  const std::int64_t token = position - firsts_[run];
  return r.file + ", token " + std::to_string(token) + " (byte " + std::to_string(r.header_bytes + r.width * token) +
         ")";
}

std::string TokenStream::files() const {
  if (runs_.size() == 1) return runs_.front().file;
  if (runs_.size() == 2) return runs_.front().file + " and " + runs_.back().file;
  return runs_.front().file + " ... " + runs_.back().file + " (" + std::to_string(runs_.size()) + " files)";
}

}  // namespace tokens
