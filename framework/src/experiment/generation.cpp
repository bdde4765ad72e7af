#include "experiment/generation.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

#include "mixt/cached_decoding.h"
#include "mixt/error.h"

namespace mixt {

namespace {
// One token from the last position's logits [1, vocab], drawn on the CPU in float32.
std::int64_t draw(const at::Tensor& last_logits, const SamplingOptions& options, at::Generator& generator) {
  at::Tensor logits = last_logits.to(at::kCPU, at::kFloat).view({-1});
  if (options.temperature <= 0) return logits.argmax().item<std::int64_t>();
  logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(0)) {
    const at::Tensor kth = std::get<0>(logits.topk(options.top_k)).select(0, options.top_k - 1);
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
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
    const std::int64_t token = draw(logits.select(1, logits.size(1) - 1), options, generator);
    next = at::full({1, 1}, token, sequence.options());
    sequence = at::cat({sequence, next}, 1);
    if (each) each(token);
  }
  if (cached) cached->clear_cache();
  model.train(training);
  return sequence.cpu();
}

}  // namespace mixt
