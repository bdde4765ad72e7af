#include "token_windows.h"

#include <mixt/error.h>

#include <algorithm>

namespace tokens {

Span span_between(std::int64_t total, double from, double to) {
  const auto at = [total](double fraction) { return static_cast<std::int64_t>(fraction * static_cast<double>(total)); };
  return {at(from), std::min(at(to), total)};
}

TokenWindows::TokenWindows(std::shared_ptr<const TokenStream> stream, Span span, std::int64_t context,
                           std::optional<std::int64_t> vocab)
    : stream_(std::move(stream)), span_(span), context_(context), vocab_(vocab) {}

mixt::Sample TokenWindows::load(std::int64_t index, mixt::SampleRng&) const {
  at::Tensor window = at::empty({context_ + 1}, at::kLong);
  std::int64_t* ids = window.data_ptr<std::int64_t>();
  stream_->copy(first_token(index), context_ + 1, ids);
  if (vocab_) {
    for (std::int64_t i = 0; i <= context_; ++i) {
      if (ids[i] >= *vocab_) {
        throw mixt::runtime_error(stream_->locate(first_token(index) + i) + ": token id " + std::to_string(ids[i]) +
                                      " is not below the vocabulary size " + std::to_string(*vocab_),
                                  "set vocab: to the tokenizer's vocabulary size, or check the file's format "
                                  "(a file read with the wrong format gives ids out of range)");
      }
    }
  }
  return {window, 0};  // the targets are the window itself, shifted (TokenDataset)
}

std::string TokenWindows::sample_name(std::int64_t index) const {
  return "window " + std::to_string(index) + " at " + stream_->locate(first_token(index));
}

}  // namespace tokens
