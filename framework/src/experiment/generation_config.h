// What a transformers checkpoint directory says of generation: its generation_config.json,
// else the end-of-sequence ids of its config.json (transformers' GenerationConfig.from_model_config),
// with transformers' global defaults where neither says (greedy, top_k 50, ...), so that
// `mixt generate` on `model.from: DIR` samples as transformers' generate does on DIR.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mixt {

struct GenerationDefaults {
  std::string source;             // the file read, for the start-up line and errors
  std::vector<std::int64_t> eos;  // stop tokens
  bool do_sample = false;         // false: the likeliest token (temperature 0)
  double temperature = 1.0;
  std::int64_t top_k = 50;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
};

// A recipe error naming the file and key for a value of the wrong type or out of range.
GenerationDefaults read_generation_defaults(const std::filesystem::path& dir);

}  // namespace mixt
