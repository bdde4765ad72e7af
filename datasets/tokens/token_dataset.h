// A token dataset: the loader's batches of windows [batch, context + 1] turned into inputs
// (each window but its last token) and targets (each window but its first), so target t is
// the token that follows input t. The loader gives it the epoch order, the shards, their
// padding and mid-epoch resume.
#pragma once

#include <mixt/dataset.h>
#include <mixt/helpers/data_loader.h>
#include <mixt/options.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "token_stream.h"
#include "window_keys.h"

namespace tokens {

class TokenDataset : public mixt::LoaderDataset, public mixt::DescribesPreprocessing {
 public:
  TokenDataset(std::shared_ptr<const mixt::SampleSource> windows, mixt::LoaderOptions options, std::int64_t vocab,
               std::int64_t context, std::string preprocessing)
      : LoaderDataset(std::move(windows), std::move(options), vocab, {context}),
        preprocessing_(std::move(preprocessing)) {}

  std::optional<mixt::Batch> next_batch() override;
  std::string preprocessing() const override { return preprocessing_; }
  mixt::DatasetCapabilities capabilities() override {
    mixt::DatasetCapabilities can = LoaderDataset::capabilities();
    can.describes_preprocessing = this;
    return can;
  }

 private:
  std::string preprocessing_;
};

// What both datasets of the plugin build: `stream` cut by `keys` into windows, checked to
// hold one (a recipe error at `context` otherwise); ids checked against `checked_vocab`.
std::unique_ptr<mixt::Dataset> make_token_dataset(std::shared_ptr<const TokenStream> stream, const WindowKeys& keys,
                                                  std::int64_t vocab, std::optional<std::int64_t> checked_vocab,
                                                  mixt::LoaderOptions options, const mixt::RecipeSection& where,
                                                  const std::string& what_the_tokens_are);

}  // namespace tokens
