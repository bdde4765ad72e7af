// libsentencepiece trusts a model's precompiled_charsmap (its normalization rules: a
// darts-clone trie, then the NUL-separated strings it maps to): a damaged one reads outside
// the model while encoding (found by fuzzing: fuzz/regressions/sentencepiece). These walk
// the serialized model and check every charsmap in it before libsentencepiece loads it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mixt::text {

// What is wrong with a charsmap (its trie reaches outside itself, or a rule's string
// outside the strings, or they do not end with a NUL); empty when it is sound.
std::optional<std::string> charsmap_problem(std::string_view charsmap);

// The first problem of the charsmaps (normalizer's and denormalizer's) of the serialized
// ModelProto `model`; empty when they are sound, or when `model` is not a protobuf
// libsentencepiece could read (which refuses it then).
std::optional<std::string> model_charsmap_problem(std::string_view model);

}  // namespace mixt::text
