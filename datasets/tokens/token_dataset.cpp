#include "token_dataset.h"

#include "token_windows.h"

namespace tokens {

std::optional<mixt::Batch> TokenDataset::next_batch() {
  std::optional<mixt::Batch> windows = LoaderDataset::next_batch();
  if (!windows) return std::nullopt;
  const at::Tensor& w = windows->inputs;
  const std::int64_t context = w.size(1) - 1;
  return mixt::Batch{w.narrow(1, 0, context).contiguous(), w.narrow(1, 1, context).contiguous()};
}

std::unique_ptr<mixt::Dataset> make_token_dataset(std::shared_ptr<const TokenStream> stream, const WindowKeys& keys,
                                                  std::int64_t vocab, std::optional<std::int64_t> checked_vocab,
                                                  mixt::LoaderOptions options, const mixt::RecipeSection& where,
                                                  const std::string& what_the_tokens_are) {
  const Span span = span_between(stream->size(), keys.from, keys.to);
  if (span.size() < keys.context + 1) {
    where.fail("context",
               stream->files() + ": needs at least context + 1 = " + std::to_string(keys.context + 1) +
                   " tokens, the span holds " + std::to_string(span.size()) + " (tokens " +
                   std::to_string(span.begin) + " to " + std::to_string(span.end) + " of " +
                   std::to_string(stream->size()) + ": from " + mixt::format_yaml(keys.from) + " to " +
                   mixt::format_yaml(keys.to) + ")",
               "lower context, widen from/to, or give more tokens");
  }
  auto windows = std::make_shared<const TokenWindows>(std::move(stream), span, keys.context, checked_vocab);
  return std::make_unique<TokenDataset>(std::move(windows), std::move(options), vocab, keys.context,
                                        what_the_tokens_are + ", windows of " + std::to_string(keys.context + 1));
}

}  // namespace tokens
