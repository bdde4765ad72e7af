// Shared by the language-model plugins (gpt2, llama; header only): the tied head and the
// checks of what the data delivers.
#pragma once

#include <mixt/helpers/linear.h>
#include <mixt/model.h>
#include <mixt/options.h>
#include <torch/nn/modules/embedding.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mixt::models {

// lm_head: nn.Linear(width, vocab, bias=False) whose weight is the token embedding's. It
// registers no parameter (a tensor registered twice would be in the optimizer's list twice);
// it reads the embedding's weight at each call, so it follows whatever device, dtype or
// values the embedding is given.
class TiedLmHeadImpl : public torch::nn::Module, public LinearMaps {
 public:
  explicit TiedLmHeadImpl(torch::nn::Embedding tied) : tied_(std::move(tied)) {}
  at::Tensor forward(const at::Tensor& x) { return linear("", x, tied_->weight, {}); }
  std::vector<Map> linear_maps() const override { return {{"", tied_->weight, {}}}; }
  const at::Tensor& weight() const { return tied_->weight; }

 private:
  torch::nn::Embedding tied_;  // the model's embedding, not registered here
};
TORCH_MODULE(TiedLmHead);

// A vocabulary's size, bounded by int32 ids (ONNX exports take int32 ids too): a larger one in
// a config.json is a mistake, said before the embedding's allocation follows from it (the
// largest published vocabularies are ~256k).
inline Bounds vocabulary_size() { return between(1, 2147483647); }

// A language model takes token sequences no longer than its context: said at the recipe's
// model section rather than deep inside an embedding.
inline void require_token_sequences(const RecipeSection& where, const ModelContext& context,
                                    std::int64_t context_length, const std::string& model) {
  const auto& s = context.sample_shape;
  if (!s.empty() && s.size() != 1) {
    std::string shape;
    for (auto d : s) shape.append(shape.empty() ? "" : "x").append(std::to_string(d));  // gcc 12 misreads a + chain
    where.fail("name",
               model +
                   " takes token sequences (a sample is [time] token ids), but the data delivers samples of shape " +
                   shape,
               "use a token dataset");
  }
  if (s.size() == 1 && s[0] > context_length) {
    where.fail("context_length",
               "the data delivers sequences of " + std::to_string(s[0]) + " tokens but the model's context_length is " +
                   std::to_string(context_length),
               "raise context_length, or shorten the sequences");
  }
}

}  // namespace mixt::models
