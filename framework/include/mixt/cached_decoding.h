// mixt/cached_decoding.h — an optional interface of a language model: decoding a sequence a
// few tokens at a time, keeping each layer's attention keys and values (a KV cache), so
// that `mixt generate` computes only the new positions at each step. A model without it
// is run over the whole sequence for every new token: the same tokens, more arithmetic.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace mixt {

// Since ABI 5.1. A model derives from it besides mixt::Model; the host finds it with a
// dynamic_cast (its type information lives in libmixt, so the cast works across libraries).
class CachedDecoding {
 public:
  virtual ~CachedDecoding();
  // The longest sequence the model takes (its position table): generation crops to it.
  virtual std::int64_t context_length() const = 0;
  // Forgets the cached keys and values: the next decode() starts a sequence at position 0.
  virtual void clear_cache() = 0;
  // Logits [batch, new, vocab] of `tokens` [batch, new] that continue the sequence decoded
  // since clear_cache(): each position sees the cached ones and the new ones before it, as
  // forward() on the whole sequence would. Called in eval mode, without gradients.
  virtual at::Tensor decode(const at::Tensor& tokens) = 0;
};

}  // namespace mixt
