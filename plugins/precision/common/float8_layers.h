// Shared by the float8 policies: which of a model's linear layers (mixt/helpers/linear.h)
// compute in float8, from the options fp8_modules, fp8_exclude and exclude_first_last.
#pragma once

#include <fnmatch.h>
#include <mixt/error.h>
#include <mixt/helpers/linear.h>
#include <mixt/helpers/master_weights.h>
#include <mixt/options.h>

#include <string>
#include <utility>
#include <vector>

namespace mixt::precision {

struct Float8LayerOptions {
  std::vector<std::string> modules, exclude;
  bool exclude_first_last = true;
  std::vector<std::string> fp32_modules;  // not an option of its own: the context's (precision.fp32_modules)
};

inline const OptionsOf<Float8LayerOptions> kFloat8LayerOptions =
    OptionsOf<Float8LayerOptions>()
        .add(&Float8LayerOptions::modules, "fp8_modules",
             "linear layers, or modules holding them, computed in float8, by name or glob (`fnmatch`: `'encoder.*'`, "
             "`'*.mlp.*'`); empty: all")
        .add(&Float8LayerOptions::exclude, "fp8_exclude",
             "linear layers, or modules holding them, kept in bfloat16, by name or glob as `fp8_modules`")
        .add(&Float8LayerOptions::exclude_first_last, "exclude_first_last",
             "the model's first and last linear layer (in `named_modules()` order, the forward's for the zoo) stay "
             "bfloat16, as Transformer Engine advises");

// The recipe's options with the context's fp32_modules.
inline Float8LayerOptions with_fp32_modules(Float8LayerOptions options, std::vector<std::string> fp32_modules) {
  options.fp32_modules = std::move(fp32_modules);
  return options;
}

// `name` is the pattern, matches it as a glob, or lies under a module that does.
inline bool matches(const std::string& name, const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0 || fnmatch((pattern + ".*").c_str(), name.c_str(), 0) == 0) {
      return true;
    }
  }
  return false;
}

struct Float8Layers {
  std::vector<LinearLayer> float8;      // computed in float8
  std::vector<std::string> misaligned;  // chosen, but a dimension is not a multiple of 16: bfloat16
};

// The layers the options choose. at::_scaled_mm takes dimensions that are multiples of 16
// only (on CUDA): the others stay in bfloat16, listed in `misaligned`.
inline Float8Layers choose_float8_layers(torch::nn::Module& model, const Float8LayerOptions& o) {
  const std::vector<LinearLayer> layers = linear_layers(model);
  Float8Layers chosen;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LinearLayer& layer = layers[i];
    if (o.exclude_first_last && (i == 0 || i + 1 == layers.size())) continue;
    if (!o.modules.empty() && !matches(layer.name, o.modules)) continue;
    if (matches(layer.name, o.exclude)) continue;
    if (lies_under(layer.name + ".weight", o.fp32_modules)) continue;  // float32, as the recipe asks
    if (layer.in_features() % 16 != 0 || layer.out_features() % 16 != 0) {
      chosen.misaligned.push_back(layer.name + " (" + std::to_string(layer.in_features()) + " -> " +
                                  std::to_string(layer.out_features()) + ")");
      continue;
    }
    chosen.float8.push_back(layer);
  }
  return chosen;
}

// Says once, at start-up, which chosen layers stay in bfloat16 and why.
inline void warn_misaligned(const std::string& policy, const Float8Layers& chosen) {
  if (chosen.misaligned.empty()) return;
  std::string names;
  for (const std::string& name : chosen.misaligned) names += (names.empty() ? "" : ", ") + name;
  warn("precision " + policy + ": " + std::to_string(chosen.misaligned.size()) +
       " linear layer(s) stay in bfloat16, their dimensions not multiples of 16 (at::_scaled_mm's requirement): " +
       names);
}

}  // namespace mixt::precision
