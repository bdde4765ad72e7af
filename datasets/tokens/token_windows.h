// The samples of causal language modelling: windows of context + 1 consecutive tokens,
// starting every `context` tokens of the span, so consecutive windows share one token (the
// last target of one is the first input of the next, as in llm.c's loader). A span of N
// tokens holds floor((N - 1) / context) windows.
#pragma once

#include <mixt/helpers/data_loader.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "token_stream.h"

namespace tokens {

// Tokens [begin, end) of the stream.
struct Span {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

// The span between fractions `from` and `to` of `total` tokens, each rounded down as
// nanoGPT splits its data (train = data[:int(n*0.9)], val = data[int(n*0.9):]).
Span span_between(std::int64_t total, double from, double to);

class TokenWindows : public mixt::SampleSource {
 public:
  // `vocab`: ids must be below it (checked as windows are read); none for bytes, always below 256.
  TokenWindows(std::shared_ptr<const TokenStream> stream, Span span, std::int64_t context,
               std::optional<std::int64_t> vocab);

  std::int64_t size() const override { return (span_.size() - 1) / context_; }
  // Window `index` as int64 [context + 1]. A token id at or above the vocabulary is a
  // mixt::Error naming its file and offset: the loader stops the epoch with it.
  mixt::Sample load(std::int64_t index, mixt::SampleRng& rng) const override;
  std::string sample_name(std::int64_t index) const override;

 private:
  std::int64_t first_token(std::int64_t index) const { return span_.begin + index * context_; }

  std::shared_ptr<const TokenStream> stream_;
  Span span_;
  std::int64_t context_;
  std::optional<std::int64_t> vocab_;
};

}  // namespace tokens
