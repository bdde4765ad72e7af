// `mixt generate RUN|CHECKPOINT|RECIPE`: samples text (or token ids) from a trained language
// model (experiment/generation.h), with its KV cache when the model has one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "commands/command.h"

namespace mixt::cli {

struct GenerateOptions {
  std::string target;                  // a run directory, its checkpoints/, a checkpoint, or a recipe
  std::vector<std::string> overrides;  // key=value, as for `mixt run`
  std::string prompt;                  // text: model.tokenizer encodes it, or its bytes for a byte-level model
  std::string tokens;                  // token ids, "15496, 11, 995" or "15496 11 995"
  std::int64_t max_new_tokens = 200;
  // Unset: model.from's generation_config.json (transformers' defaults), else mixt's: sampling
  // at temperature 1 from every token.
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<std::int64_t> top_k;
  std::uint64_t seed = 0;
  bool ignore_eos = false;  // draw max_new_tokens even past the end-of-sequence token
  bool chat = false;        // the prompt as a user turn in the tokenizer folder's chat template
  std::optional<std::string> date;  // --chat, llama3.1's template: its "Today Date" instead of the template's
  std::string precision;    // a policy to run under instead of the recipe's
  bool no_cache = false;
  bool ema = false;
  bool best = false;
};

int generate(const GenerateOptions& options);
void add_generate_command(CLI::App& app, Commands& commands);

}  // namespace mixt::cli
