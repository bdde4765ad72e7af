// Sampling new tokens from a language model as transformers' generate does: the logits of the
// last position, the repetition penalty on the tokens so far, then (sampling) divided by the
// temperature, cut to the top k and to the top p of the probability, softmax, one draw; or
// (temperature 0) the likeliest token. Drawing a stop token (the end of sequence) ends it. With
// a model that decodes with a KV cache (mixt/cached_decoding.h) each new token costs one
// position; otherwise, or when asked, the whole sequence (its last context_length tokens) is
// run again for each. Both draw the same tokens for the same seed.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "mixt/model.h"
#include "mixt/precision.h"

namespace mixt {

struct SamplingOptions {
  std::int64_t max_new_tokens = 100;
  double temperature = 1.0;  // 0: always the most likely token
  std::int64_t top_k = 0;    // 0: every token may be drawn
  double top_p = 1.0;        // the fewest likeliest tokens whose probability reaches it (1: all)
  double repetition_penalty = 1.0;        // > 1 makes tokens already in the sequence less likely (CTRL's)
  std::vector<std::int64_t> stop_tokens;  // drawing one ends the generation (it is kept)
  std::uint64_t seed = 0;    // the draws' generator (on the CPU, whatever the model's device)
  bool use_cache = true;     // false: run the whole sequence for each token
  // Longest sequence a model without mixt::CachedDecoding takes (0: no limit); a model with
  // it says its own.
  std::int64_t context_length = 0;
};

// `prompt`: token ids [1, n], n >= 1, on the model's device. Returns prompt and new tokens,
// [1, n + at most max_new_tokens], on the CPU. `each`: called with each new token as it is drawn
// (printing as it goes); may be empty. Runs in eval mode, without gradients, under the
// policy's autocast.
at::Tensor generate(Model& model, const PrecisionPolicy& precision, const at::Tensor& prompt,
                    const SamplingOptions& options, const std::function<void(std::int64_t)>& each = {});

}  // namespace mixt
