#include "experiment/generation.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>

#include "mixt/cached_decoding.h"
#include "mixt/error.h"

namespace mixt {

namespace {
// One token from the last position's logits [1, vocab], in float32 on the CPU, processed in
// transformers' order (RepetitionPenalty, then Temperature, TopK, TopP for sampling).
std::int64_t draw(const at::Tensor& last_logits, const at::Tensor& sequence, const SamplingOptions& options,
                  at::Generator& generator) {
  constexpr float kRemoved = -std::numeric_limits<float>::infinity();
  at::Tensor logits = last_logits.to(at::kCPU, at::kFloat).view({-1});
  if (options.repetition_penalty != 1.0) {
    const at::Tensor seen = sequence.view({-1}).cpu();
    const at::Tensor score = logits.gather(0, seen);
    logits = logits.scatter(
        0, seen, at::where(score < 0, score * options.repetition_penalty, score / options.repetition_penalty));
  }
  if (options.temperature <= 0) return logits.argmax().item<std::int64_t>();
  logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(0)) {
    const at::Tensor kth = std::get<0>(logits.topk(options.top_k)).select(0, options.top_k - 1);
    logits = logits.masked_fill(logits < kth, kRemoved);
  }
  if (options.top_p < 1.0) {
    // Ascending: drop the unlikeliest while what they add up to stays within 1 - top_p; the
    // likeliest token always stays.
    const auto [sorted, order] = logits.sort(/*stable=*/false, 0, /*descending=*/false);
    at::Tensor drop = sorted.softmax(0).cumsum(0) <= (1 - options.top_p);
    drop.index_put_({-1}, false);
    logits = logits.masked_fill(drop.scatter(0, order, drop), kRemoved);
  }
  return at::multinomial(at::softmax(logits, 0), 1, /*replacement=*/false, generator).item<std::int64_t>();
}
}  // namespace

at::Tensor generate(Model& model, const PrecisionPolicy& precision, const at::Tensor& prompt,
                    const SamplingOptions& options, const std::function<void(std::int64_t)>& each) {
  if (prompt.dim() != 2 || prompt.size(0) != 1 || prompt.size(1) < 1) {
    throw usage_error("generation needs a prompt of at least one token");
  }
  at::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  AutocastScope autocast = precision.autocast(prompt.device().type());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  // The model's own context when it says it, with the cache or without: both crop alike.
  auto* decoder = dynamic_cast<CachedDecoding*>(&model);
  CachedDecoding* cached = options.use_cache ? decoder : nullptr;
  const std::int64_t context = decoder ? decoder->context_length() : options.context_length;
  at::Tensor sequence = prompt.to(at::kLong);
  // The window the model sees: the last `context` tokens (all when no limit).
  const auto window = [&](const at::Tensor& all) {
    return context > 0 && all.size(1) > context ? all.slice(1, all.size(1) - context) : all;
  };
  if (cached) cached->clear_cache();
  std::int64_t decoded = 0;  // positions in the cache
  at::Tensor next;           // [1, 1]: the last token drawn, on the model's device
  for (std::int64_t i = 0; i < options.max_new_tokens; ++i) {
    at::Tensor logits;
    if (!cached) {
      logits = model.forward(window(sequence));
    } else if (decoded == 0 || decoded + 1 > context) {
      // A first pass, or the sequence outgrew the positions: start again on the window.
      cached->clear_cache();
      const at::Tensor seen = window(sequence);
      logits = cached->decode(seen);
      decoded = seen.size(1);
    } else {
      logits = cached->decode(next);
      decoded += 1;
    }
    const std::int64_t token = draw(logits.select(1, logits.size(1) - 1), sequence, options, generator);
    next = at::full({1, 1}, token, sequence.options());
    sequence = at::cat({sequence, next}, 1);
    if (each) each(token);
    if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) != options.stop_tokens.end()) break;
  }
  if (cached) cached->clear_cache();
  model.train(training);
  return sequence.cpu();
}

}  // namespace mixt
